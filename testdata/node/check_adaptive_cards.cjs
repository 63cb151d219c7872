// Parses every Adaptive Card in the JSON file named by the first argument
// ({"name": card, ...}) with the Adaptive Cards parser from npm
// (adaptivecards; its UMD build, which needs no DOM to parse), and prints
// one line per problem: a parse or validation event, or a property of the
// card the parser did not keep (a misspelt or unknown property, an
// element of the wrong type). Exit status 1 when there is any.
const fs = require("node:fs");
const AC = require("adaptivecards/dist/adaptivecards.js");

// Properties that are not the Adaptive Cards schema's but a host's:
// Teams reads "msteams" (the card's width); "$schema" is metadata.
const hostOnly = new Set(["msteams", "$schema"]);

function dropped(input, output, path, out) {
  if (Array.isArray(input)) {
    input.forEach((v, i) => dropped(v, Array.isArray(output) ? output[i] : undefined, `${path}[${i}]`, out));
    return;
  }
  if (input === null || typeof input !== "object") return;
  for (const [k, v] of Object.entries(input)) {
    if (hostOnly.has(k)) continue;
    const kept = output && typeof output === "object" ? output[k] : undefined;
    // The parser leaves out values equal to their defaults.
    const isDefault = v === false || v === "" || v === "default" || (Array.isArray(v) && v.length === 0);
    if (kept === undefined && !isDefault) {
      out.push(`${path}.${k}: not kept by the parser (${JSON.stringify(v).slice(0, 80)})`);
      continue;
    }
    dropped(v, kept, `${path}.${k}`, out);
  }
}

const cards = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
let problems = 0;
for (const [name, json] of Object.entries(cards)) {
  const card = new AC.AdaptiveCard();
  const ctx = new AC.SerializationContext();
  card.parse(json, ctx);
  const out = [];
  for (let i = 0; i < ctx.eventCount; i++) out.push("parse: " + ctx.getEventAt(i).message);
  const v = card.validateProperties();
  for (const e of v.validationEvents || []) out.push("validate: " + e.message);
  if (card.version.toString() !== json.version) out.push(`version ${card.version} read, not ${json.version}`);
  dropped(json, card.toJSON(), name, out);
  for (const line of out) console.log(`${name}: ${line}`);
  problems += out.length;
}
console.log(`${Object.keys(cards).length} cards, ${problems} problems`);
process.exit(problems > 0 ? 1 : 0);
