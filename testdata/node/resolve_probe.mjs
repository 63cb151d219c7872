// Imports the official MCP SDK the way the suite's peers do; prints the
// type of its Client class. Run by internal/nodetest's TestPeersResolve.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
process.stdout.write(typeof Client);
