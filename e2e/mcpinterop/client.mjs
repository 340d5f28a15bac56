// The official TypeScript SDK's MCP client against one of sema's faces.
//   node client.mjs stdio <sema binary>    (SEMA_SERVER, SEMA_API_KEY from the environment)
//   node client.mjs http <url of /v1/mcp>  (SEMA_API_KEY from the environment)
// It lists the tools, runs a command with a progress token, writes a file
// and reads it back, and prints one JSON object of what it saw on stdout.
import { existsSync, readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [face, target] = process.argv.slice(2);
const transport =
  face === "stdio"
    ? new StdioClientTransport({ command: target, args: ["mcp"], env: process.env, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: { headers: { Authorization: `Bearer ${process.env.SEMA_API_KEY}` } },
      });

const client = new Client({ name: "ts-interop", version: "0.0.0" });
await client.connect(transport);

const seen = { face, server: client.getServerVersion(), progress: [] };
seen.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, annotations: t.annotations }));
const run = await client.callTool(
  // The pause lets the live output's notification arrive well before the
  // response: the client drops progress it handles after the response.
  { name: "run_command", arguments: { command: "echo hello-from-ts; sleep 0.5; echo oops >&2; exit 4" } },
  undefined,
  { onprogress: (p) => seen.progress.push(p.message ?? "") },
);
seen.run = { isError: run.isError ?? false, structured: run.structuredContent, text: run.content[0]?.text };
const path = `ts-${face}.txt`;
const write = await client.callTool({ name: "write_file", arguments: { path, content: "from the TypeScript SDK\n" } });
seen.write = { isError: write.isError ?? false, structured: write.structuredContent };
const read = await client.callTool({ name: "read_file", arguments: { path } });
seen.read = { isError: read.isError ?? false, structured: read.structuredContent };
const missing = await client.callTool({ name: "read_file", arguments: { path: "no/such/file" } });
seen.missing = { isError: missing.isError ?? false, text: missing.content[0]?.text };

// A call the client aborts: the command must not outlive it. The device's
// workspace is on this machine in the test (SEMA_INTEROP_WS), so the script
// waits for the command to have started before it aborts.
if (process.env.SEMA_INTEROP_WS) {
  const pidFile = `${process.env.SEMA_INTEROP_WS}/cancel-${face}.pid`;
  const abort = new AbortController();
  const call = client
    .callTool({ name: "run_command", arguments: { command: `echo $$ > ${pidFile}; exec sleep 60` } }, undefined, { signal: abort.signal })
    .then(() => "completed", (e) => `rejected: ${e}`);
  while (!existsSync(pidFile) || readFileSync(pidFile, "utf8").trim() === "") await new Promise((r) => setTimeout(r, 20));
  seen.cancelledPid = Number(readFileSync(pidFile, "utf8").trim());
  abort.abort("the test aborts the call");
  seen.cancelled = await call;
}
await client.close();
process.stdout.write(JSON.stringify(seen) + "\n");
