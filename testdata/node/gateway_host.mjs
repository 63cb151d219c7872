// An MCP host built on the official TypeScript SDK, for the Go tests of
// the gateway (cmd/countersign/gateway_test.go): it connects to
// Countersign over streamable HTTP, lists the tools, then makes each call
// of its config in turn, printing one JSON line on stdout per event.
//
//   node gateway_host.mjs '<json config>'
//
// config: {"url": "http://127.0.0.1:PORT/mcp", "key": "cs_sk_…",
//          "calls": [{"name": "fs__write_file", "arguments": {...}}, ...]}
// A call may say "wait": true (the host emits {"type":"waiting","index":i}
// and makes the call once it reads a line on stdin: the test does
// something between two calls), or "task": true (the SDK's task-augmented
// call, client.experimental.tasks.callToolStream, which polls tasks/get
// and reads tasks/result; events taskCreated and taskStatus come first).
// events: {"type":"tools","tools":[...]}, {"type":"calling","index":i},
// {"type":"taskCreated","index":i,"taskId":...,"status":...},
// {"type":"taskStatus","index":i,"status":...,"statusMessage":...},
// {"type":"result","index":i,"result":{...}}, {"type":"error","message":...}
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const cfg = JSON.parse(process.argv[2]);
const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const transport = new StreamableHTTPClientTransport(new URL(cfg.url), {
  requestInit: { headers: { Authorization: `Bearer ${cfg.key}` } },
});
const client = new Client({ name: "ts-gateway-host", version: "1.32.2" });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  emit({ type: "tools", tools: tools.tools });
  for (const [i, call] of (cfg.calls ?? []).entries()) {
    if (call.wait) {
      emit({ type: "waiting", index: i });
      await lines.next();
    }
    emit({ type: "calling", index: i });
    if (call.task) {
      const stream = client.experimental.tasks.callToolStream({ name: call.name, arguments: call.arguments }, undefined, { timeout: 120000 });
      for await (const m of stream) {
        if (m.type === "taskCreated") emit({ type: "taskCreated", index: i, taskId: m.task.taskId, status: m.task.status });
        if (m.type === "taskStatus") emit({ type: "taskStatus", index: i, status: m.task.status, statusMessage: m.task.statusMessage });
        if (m.type === "result") emit({ type: "result", index: i, result: m.result });
        if (m.type === "error") throw m.error;
      }
      continue;
    }
    const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, { timeout: 120000 });
    emit({ type: "result", index: i, result });
  }
} catch (err) {
  emit({ type: "error", message: String(err?.message ?? err) });
} finally {
  await client.close().catch(() => {});
  process.stdin.destroy();
}
