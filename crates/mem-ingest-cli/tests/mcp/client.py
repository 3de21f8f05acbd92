"""The Python MCP SDK's client against `mem-ingest mcp`: starts the server
over stdio, lists its tools and calls each, and prints one JSON line per
step (the Rust test `it_mcp::the_python_sdk_client_*` compares them
exactly).

    python client.py MEM_INGEST_BINARY STORE
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError


async def main(binary, store):
    params = StdioServerParameters(command=binary, args=["mcp", "--db", store])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            print(json.dumps({"server": init.server_info.name}))
            tools = await session.list_tools()
            print(json.dumps({
                "tools": sorted(t.name for t in tools.tools),
                "required": {t.name: sorted(t.input_schema.get("required", [])) for t in tools.tools},
            }, sort_keys=True))
            calls = [
                ("search", {"query": "bug", "limit": 2}),
                ("sessions", {"project": "MY-PROJECT", "limit": 2}),
                ("session", {"id": "hand", "around": "hand-built-0001:c0de0006", "limit": 3}),
                ("session", {"id": "01a229a8"}),
                ("search", {"query": "bug", "agent": "windsurf"}),
            ]
            for name, args in calls:
                try:
                    r = await session.call_tool(name, args)
                except MCPError as e:
                    print(json.dumps({"tool": name, "code": e.code, "message": e.message}, sort_keys=True, ensure_ascii=False))
                    continue
                error = r.is_error
                text = r.content[0].text if r.content else ""
                try:
                    body = json.loads(text)
                except ValueError:
                    body = text
                print(json.dumps({"tool": name, "error": bool(error), "result": body}, sort_keys=True, ensure_ascii=False))


asyncio.run(main(sys.argv[1], sys.argv[2]))
