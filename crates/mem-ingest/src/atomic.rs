//! Files replaced whole: written under a temporary name beside the file,
//! then renamed into place, so readers see all of it or none of it.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// The temporary name beside `path` that this process writes it under:
/// `.<name>.<pid>.tmp`, in the same folder (a rename never crosses file
/// systems).
pub(crate) fn temporary_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Renames the temporary file into place. `durable`: the temporary file was
/// synced, and the folder is synced after the rename, so the new file
/// survives a crash; otherwise it is left to the system to write back, as
/// `cp` does.
pub(crate) fn rename_into_place(tmp: &Path, path: &Path, durable: bool) -> io::Result<()> {
    fs::rename(tmp, path)?;
    if durable {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Writes `path` whole and durably: `write` fills a temporary file beside
/// it, which is synced and renamed into place, and the folder synced. On an
/// error the temporary file is removed and `path` is as it was.
pub(crate) fn write_durably(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary_beside(path);
    let written = (|| {
        let mut f = File::create(&tmp)?;
        write(&mut f)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    rename_into_place(&tmp, path, true)
}
