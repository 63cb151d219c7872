// An MCP host built on the official TypeScript SDK, for the Go tests of
// long waits (cmd/countersign/mcp_long_test.go). It connects to Countersign
// over streamable HTTP or stdio, calls one tool, and prints one JSON line
// on stdout per event, so that the test can act (click in Slack) when the
// call is pending and check how it ends.
//
//   node mcp_host.mjs '<json config>'
//
// config: {
//   "transport": "http" | "stdio",
//   "url": "http://127.0.0.1:PORT/mcp", "key": "cs_sk_…",      // http
//   "command": "/path/to/countersign", "args": [...], "env": {}, // stdio
//   "mode": "task" | "poll",
//   "tool": "confirm_action", "arguments": {...}
// }
//
// task: the SDK's task-augmented call (client.experimental.tasks.
// callToolStream), which it uses by itself for a tool that tools/list marks
// execution.taskSupport; events: tools, taskCreated, taskStatus, result,
// error.
// poll: a plain callTool, then action_status with wait_seconds until the
// request is decided; events: tools, pending, poll, result, error.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

const cfg = JSON.parse(process.argv[2]);
const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");

let transport;
if (cfg.transport === "stdio") {
  transport = new StdioClientTransport({ command: cfg.command, args: cfg.args, env: cfg.env, stderr: "inherit" });
} else {
  transport = new StreamableHTTPClientTransport(new URL(cfg.url), {
    requestInit: { headers: { Authorization: `Bearer ${cfg.key}` } },
  });
}
const client = new Client({ name: "ts-host", version: "1.32.2" });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  const tool = tools.tools.find((t) => t.name === cfg.tool);
  emit({
    type: "tools",
    protocolVersion: LATEST_PROTOCOL_VERSION,
    serverTasks: client.getServerCapabilities()?.tasks ?? null,
    execution: tool?.execution ?? null,
  });
  if (cfg.mode === "task") {
    const stream = client.experimental.tasks.callToolStream({ name: cfg.tool, arguments: cfg.arguments });
    for await (const m of stream) {
      switch (m.type) {
        case "taskCreated":
          emit({ type: "taskCreated", taskId: m.task.taskId, status: m.task.status, pollInterval: m.task.pollInterval });
          break;
        case "taskStatus":
          emit({ type: "taskStatus", status: m.task.status, statusMessage: m.task.statusMessage });
          break;
        case "result":
          emit({ type: "result", result: m.result });
          break;
        case "error":
          emit({ type: "error", message: String(m.error?.message ?? m.error) });
          break;
      }
    }
  } else {
    const first = await client.callTool({ name: cfg.tool, arguments: cfg.arguments });
    let data = first.structuredContent ?? {};
    emit({ type: "pending", status: data.status, request_id: data.request_id, text: first.content?.[0]?.text });
    while (data.status === "pending") {
      const r = await client.callTool({ name: "action_status", arguments: { request_id: data.request_id, wait_seconds: 60 } });
      data = r.structuredContent ?? {};
      emit({ type: "poll", status: data.status });
      if (data.status !== "pending") emit({ type: "result", result: r });
    }
  }
} catch (err) {
  emit({ type: "error", message: String(err?.message ?? err) });
} finally {
  await client.close().catch(() => {});
}
