// An MCP host built on the official TypeScript SDK, for the Go tests of
// the gateway (cmd/countersign/gateway_test.go): it connects to
// Countersign over streamable HTTP, lists the tools, then makes each call
// of its config in turn, printing one JSON line on stdout per event.
//
//   node gateway_host.mjs '<json config>'
//
// config: {"url": "http://127.0.0.1:PORT/mcp", "key": "cs_sk_…",
//          "calls": [{"name": "fs__write_file", "arguments": {...}}, ...]}
// events: {"type":"tools","tools":[...]}, {"type":"calling","index":i},
// {"type":"result","index":i,"result":{...}}, {"type":"error","message":...}
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const cfg = JSON.parse(process.argv[2]);
const emit = (ev) => process.stdout.write(JSON.stringify(ev) + "\n");

const transport = new StreamableHTTPClientTransport(new URL(cfg.url), {
  requestInit: { headers: { Authorization: `Bearer ${cfg.key}` } },
});
const client = new Client({ name: "ts-gateway-host", version: "1.32.2" });

try {
  await client.connect(transport);
  const tools = await client.listTools();
  emit({ type: "tools", tools: tools.tools });
  for (const [i, call] of (cfg.calls ?? []).entries()) {
    emit({ type: "calling", index: i });
    const result = await client.callTool({ name: call.name, arguments: call.arguments }, undefined, { timeout: 120000 });
    emit({ type: "result", index: i, result });
  }
} catch (err) {
  emit({ type: "error", message: String(err?.message ?? err) });
} finally {
  await client.close().catch(() => {});
}
