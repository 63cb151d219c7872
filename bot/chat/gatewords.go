package chat

// This file holds the scope gate's word lists (gate.go is the classifier
// that reads them): the families an out-of-lane request belongs to, with
// their verbs, nouns and hand-offs, and the vocabularies of greetings,
// capability questions, lookups and free-text decisions.

// The tables below are read-only after package initialisation.

var chatBigrams = map[[2]string]string{
	{"auto", "approve"}: "autoapprove", {"auto", "approved"}: "autoapprove",
	{"rubber", "stamp"}: "rubberstamp", {"green", "light"}: "greenlight",
	{"sign", "off"}:  "signoff",
	{"roll", "back"}: "rollback", {"shut", "down"}: "shutdown",
	{"turn", "off"}: "turnoff", {"switch", "off"}: "turnoff",
	{"force", "push"}: "forcepush", {"pull", "request"}: "pr", {"pull", "requests"}: "prs",
	{"merge", "request"}: "mr", {"on", "call"}: "oncall", {"e", "mail"}: "email",
	{"api", "key"}: "apikey", {"api", "keys"}: "apikey",
	{"blood", "thinner"}: "anticoagulant", {"blood", "thinners"}: "anticoagulant",
	{"purchase", "order"}: "po", {"thank", "you"}: "thanks", {"thank", "u"}: "thanks",
	{"look", "up"}: "lookup", {"im", "start"}: "imstart", {"im", "end"}: "imend",
}

var chatIrregularParticiples = wordSet("sent", "paid", "held", "given", "made", "written", "done", "shut", "run",
	"put", "set", "taken", "shown", "begun", "spent", "bought", "sold", "built", "kept", "read", "told", "wiped")

var chatObjectPronouns = wordSet("it", "them", "this", "that", "these", "those")

var chatArgStopwords = wordSet("the", "a", "an", "this", "that", "it", "its", "my", "our", "your", "their", "his",
	"her", "these", "those", "if", "whether", "me", "us", "all", "everything", "on", "for", "of", "to",
	"is", "what", "whats", "how", "and", "or", "in", "at", "with", "from", "please")

var chatFillers = wordSet("hi", "hey", "hello", "yo", "so", "and", "also", "but", "then", "um", "uh", "well",
	"ok", "okay", "countersign", "bot", "please", "pls", "plz", "kindly", "just", "now", "quick",
	"question", "q")

var chatAddressWords = wordSet("countersign", "bot", "hey", "hi", "hello", "ok", "okay", "so", "well", "um", "uh")

var chatPolitePrefixes = wordSeqs(
	"can you", "could you", "would you", "will you", "can u", "could u", "would u", "will u", "can ya",
	"can someone", "could someone", "can somebody", "could somebody", "can anyone", "could anyone",
	"can we", "could we", "shall we", "would you mind", "do you mind", "are you able to",
	"is it possible to", "would it be possible to", "i need you to", "i want you to", "id like you to",
	"i would like you to", "go ahead and",
)

var chatWhWords = wordSet("what", "whats", "how", "hows", "why", "whys", "when", "whens", "where", "wheres",
	"who", "whos", "whom", "whose", "which")

var chatAuxWords = wordSet("is", "isnt", "are", "arent", "was", "wasnt", "were", "werent", "do", "does", "doesnt",
	"did", "didnt", "can", "cant", "could", "couldnt", "should", "shouldnt", "would", "wouldnt", "will",
	"wont", "may", "might", "must", "has", "hasnt", "have", "havent", "had", "am", "shall")

// chatLookupVerbs opening a clause make it an in-lane lookup ("check if it is
// safe to …") when followed closely by one of chatLookupObjects.
var chatLookupVerbs = wordSet("check", "show", "list", "view", "see", "display", "verify", "lookup", "tell")

var chatLookupObjects = wordSet("if", "whether", "safe", "pending", "history", "status", "what", "whats", "who",
	"why", "how", "when")

var chatCapabilityPhrases = wordSeqs(
	"what can you do", "what can u do", "what do you do", "what are you", "who are you", "what is this",
	"whats this", "what is countersign", "whats countersign", "how do you work", "how does this work",
	"how does countersign work", "how does it work", "how do i use", "how can i use", "how can you help",
	"what can i do", "what can i ask", "what should i type", "what do i type", "what are the commands",
	"what commands", "which commands", "list commands", "list the commands", "show commands",
	"show the commands", "commands", "usage", "help", "how to use",
)

var chatGreetingWords = wordSet("hi", "hello", "hey", "hiya", "heya", "howdy", "yo", "gm", "morning", "good",
	"afternoon", "evening", "day", "there", "all", "everyone", "folks", "team", "countersign", "bot",
	"thanks", "thank", "you", "ty", "thx", "cheers", "sup", "whats", "up", "ok", "okay", "great", "cool",
	"nice", "again", "much", "so", "very", "hallo", "greetings", "thats", "all", "for", "now", "bye", "later")

// chatDecisionCore words carry consent or refusal; chatDecisionVocab may surround
// them in a message that says nothing else.
var chatDecisionCore = wordSet("yes", "y", "yep", "yeah", "yup", "ya", "yea", "sure", "ok", "okay", "k", "kk", "good",
	"okey", "alright", "proceed", "lgtm", "sgtm", "approve", "approved", "approving", "confirm", "confirmed",
	"agree", "agreed", "accept", "accepted", "go", "ship", "do", "fine", "no", "nope", "nah", "n",
	"reject", "rejected", "deny", "denied", "decline", "declined", "cancel", "veto", "granted",
	"affirmative", "negative", "absolutely", "definitely", "signoff", "greenlight", "rubberstamp", "stop",
	"wait", "hold", "halt", "abort", "dont")

var chatDecisionVocab = func() map[string]bool {
	m := wordSet("it", "this", "that", "one", "ahead", "for", "to", "me", "looks", "look", "good", "great",
		"sounds", "please", "pls", "i", "we", "the", "request", "change", "item", "let", "lets", "s",
		"just", "now", "all", "right", "on", "with", "then", "from", "my", "side", "and", "done", "dont",
		"not", "of", "course", "by", "go", "countersign", "bot", "hey", "yes", "do")
	for w := range chatDecisionCore {
		m[w] = true
	}
	return m
}()

var chatApproveWords = wordSet("approve", "approved", "approving", "accept", "accepted", "confirm", "confirmed")

var chatRejectWords = wordSet("reject", "rejected", "rejecting", "deny", "denied", "decline", "declined", "veto")

var chatDecisionOpeners = wordSet("approve", "approved", "reject", "rejected", "deny", "denied", "confirm",
	"confirmed", "accept", "accepted", "decline", "declined", "yes", "yep", "yeah", "yup", "lgtm", "sgtm",
	"veto")

var chatDecisionStrong = wordSet("approve", "approved", "reject", "rejected", "deny", "denied", "lgtm", "sgtm",
	"confirmed", "accepted", "declined", "veto", "signoff")

var chatDecisionEmoji = []string{"👍", "👎", "✅", "✔", "❌", "✖", "🆗", "💯", "🚀", "🙆", "🙅"}

// gateFamilies is the denylist, in the order refusals list the families.
var gateFamilies = []gateFamily{
	{
		family: FamilyApproval,
		rules: []gateRule{
			{
				verbs: wordSet("approve", "approves", "approved", "approving", "autoapprove", "accept", "confirm",
					"greenlight", "rubberstamp", "signoff", "reject", "deny", "decline"),
				nouns: wordSet("everything", "all", "anything", "every", "whatever", "rest", "everyone"),
			},
			{
				verbs: wordSet("skip", "bypass", "disable", "disabled", "turnoff", "override", "circumvent", "ignore",
					"remove", "avoid", "stop", "kill", "deactivate", "suspend"),
				nouns: wordSet("approval", "approvals", "approver", "approvers", "gate", "gates", "confirmation",
					"confirmations", "countersign", "quorum", "review", "reviews", "signoff", "human", "humans"),
			},
		},
		phrases: wordSeqs("autoapprove", "rubberstamp", "always approve", "approve without", "approve them all",
			"approve all", "approve on my behalf", "approve for me", "approve as"),
		handoff: "Nobody in the software approves — approving is a human decision. A person with the approve role decides each item on its own, with the buttons or `approve <id>`; there is no approve-all, and the gate cannot be switched off from chat.",
	},
	{
		family: FamilyInjection,
		always: true,
		rules: []gateRule{{
			verbs: wordSet("ignore", "disregard", "forget", "override", "bypass", "drop", "skip", "abandon"),
			nouns: wordSet("instructions", "instruction", "rules", "prompt", "prompts", "guidelines", "directives",
				"guardrails", "programming", "constraints", "restrictions", "policies", "system"),
		}},
		phrases: wordSeqs("ignore previous", "ignore all previous", "ignore the above", "ignore above",
			"ignore everything above", "disregard previous", "disregard the above", "disregard above",
			"you are now", "act as", "pretend to be", "pretend you", "developer mode", "dan mode", "jailbreak",
			"jailbroken", "system prompt", "new instructions", "imstart", "imend", "admin override", "sudo mode"),
		markers:     []string{"<|im_start|>", "<|im_end|>", "<|system|>", "<<sys>>", "<system>", "</system>", "[inst]", "[/inst]"},
		lineMarkers: []string{"system:", "[system]", "assistant:", "developer:", "### instruction", "### system"},
		handoff:     "Text in a message is data to me, never an instruction. Only a person mapped to a principal decides, with the buttons or `approve <id>` / `reject <id> <reason>`.",
	},
	{
		family: FamilyDestructive,
		rules: []gateRule{{
			verbs: wordSet("delete", "deletes", "deleted", "deleting", "deletion", "drop", "drops", "dropped",
				"dropping", "wipe", "wipes", "wiped", "wiping", "truncate", "truncated", "truncating", "destroy",
				"destroyed", "destroying", "purge", "purged", "purging", "erase", "erased", "erasing", "remove",
				"removed", "removing", "rm", "nuke", "nuked", "format", "formatted", "overwrite", "overwritten",
				"clean", "cleanup", "empty", "emptied"),
			nouns: wordSet("database", "databases", "db", "dbs", "table", "tables", "data", "dataset", "datasets",
				"record", "records", "row", "rows", "file", "files", "folder", "folders", "directory",
				"directories", "bucket", "buckets", "backup", "backups", "volume", "volumes", "disk", "disks",
				"cluster", "clusters", "namespace", "namespaces", "index", "indexes", "collection",
				"collections", "schema", "repo", "repos", "repository", "branch", "branches", "account",
				"accounts", "user", "users", "prod", "production", "logs", "log", "server", "servers", "vm",
				"vms", "instance", "instances", "snapshot", "snapshots", "environment", "env", "everything",
				"storage", "history", "audit", "trail", "patient", "patients", "chart", "charts"),
		}},
		phrases: wordSeqs("rm rf", "drop table", "drop database"),
		handoff: "To delete or wipe data, the agent that owns that operation requests it with confirm_action, and an approver decides here.",
	},
	{
		family: FamilyOperations,
		rules: []gateRule{{
			verbs: wordSet("restart", "restarts", "restarted", "restarting", "reboot", "rebooted", "rebooting",
				"stop", "stopped", "stopping", "start", "started", "starting", "shutdown", "kill", "killed",
				"scale", "scaled", "scaling", "rollback", "redeploy", "redeployed", "deploy", "deployed",
				"deploying", "release", "released", "ship", "shipped", "promote", "promoted", "failover",
				"drain", "drained", "cordon", "migrate", "migrated", "run", "execute", "executed", "exec",
				"trigger", "triggered", "provision", "provisioned", "upgrade", "upgraded", "downgrade", "patch",
				"patched", "bounce", "bounced", "pause", "paused", "resume", "suspend", "suspended", "terminate",
				"terminated", "spin", "apply", "applied", "push", "pushed", "revert", "reverted"),
			nouns: wordSet("service", "services", "server", "servers", "pod", "pods", "node", "nodes", "cluster",
				"clusters", "container", "containers", "deployment", "deployments", "job", "jobs", "process",
				"processes", "instance", "instances", "vm", "vms", "app", "apps", "application", "api",
				"worker", "workers", "daemon", "queue", "pipeline", "pipelines", "build", "release",
				"production", "prod", "staging", "migration", "migrations", "cron", "lambda", "gateway",
				"database", "db", "kubernetes", "kubectl", "terraform", "docker", "host", "hosts",
				"stack", "infra", "infrastructure", "traffic", "canary", "rollout", "version", "backend",
				"frontend", "website", "site", "system", "systems", "nginx", "redis", "postgres", "kafka",
				"helm", "hotfix", "live"),
		}},
		leading: wordSet("deploy", "redeploy", "reboot", "rollback", "failover", "restart", "shutdown"),
		handoff: "To restart, stop or deploy a service, the agent that owns that operation requests it with confirm_action, and an approver decides here.",
	},
	{
		family: FamilyClinical,
		rules: []gateRule{{
			verbs: wordSet("stop", "stopped", "stopping", "start", "started", "starting", "discontinue",
				"discontinued", "prescribe", "prescribed", "prescribing", "give", "giving", "administer",
				"administered", "increase", "increased", "decrease", "decreased", "reduce", "reduced", "raise",
				"lower", "double", "halve", "titrate", "hold", "held", "pause", "resume", "restart", "switch",
				"switched", "change", "changed", "adjust", "adjusted", "dose", "dispense", "order", "ordered",
				"refill", "renew", "wean", "taper", "add", "swap", "replace", "cancel", "set", "put", "take",
				"bump", "cut", "remove", "drop"),
			nouns: wordSet("medication", "medications", "med", "meds", "medicine", "medicines", "drug", "drugs",
				"dose", "doses", "dosage", "dosing", "prescription", "prescriptions", "rx", "tablet", "tablets",
				"pill", "pills", "injection", "infusion", "insulin", "warfarin", "apixaban", "rivaroxaban",
				"dabigatran", "heparin", "enoxaparin", "aspirin", "clopidogrel", "metformin", "lisinopril",
				"amlodipine", "atorvastatin", "simvastatin", "metoprolol", "furosemide", "digoxin",
				"amiodarone", "prednisone", "prednisolone", "morphine", "oxycodone", "fentanyl",
				"hydromorphone", "paracetamol", "acetaminophen", "ibuprofen", "amoxicillin", "penicillin",
				"vancomycin", "ceftriaxone", "levothyroxine", "omeprazole", "gabapentin", "sertraline",
				"lithium", "methotrexate", "antibiotic", "antibiotics", "anticoagulant", "anticoagulants",
				"anticoagulation", "mg", "mcg", "ml", "units", "treatment", "therapy", "chemo",
				"chemotherapy", "iv", "drip", "statin", "statins", "steroid", "steroids", "opioid", "opioids",
				"vaccine", "vaccination"),
		}},
		handoff: "To start, stop or change a medication, a clinician orders it in the clinical record. When an agent proposes the change to memory, it waits here until a person with the approve role confirms it.",
	},
	{
		family: FamilyMessaging,
		rules: []gateRule{{
			verbs: wordSet("send", "sends", "sent", "sending", "email", "emailed", "emailing", "mail", "mailed",
				"message", "messaged", "text", "texted", "notify", "notified", "contact", "contacted", "call",
				"phone", "page", "paged", "ping", "pinged", "dm", "reply", "respond", "forward", "forwarded",
				"post", "posted", "publish", "published", "tweet", "announce", "tell", "inform", "informed",
				"alert", "alerted", "remind", "broadcast", "fax", "write"),
			nouns: wordSet("email", "emails", "mail", "message", "messages", "letter", "letters", "sms", "text",
				"texts", "notification", "notifications", "reply", "newsletter", "announcement", "patient",
				"patients", "customer", "customers", "client", "clients", "family", "gateFamilies", "doctor",
				"doctors", "nurse", "nurses", "pharmacist", "pharmacy", "vendor", "supplier", "team",
				"everyone", "oncall", "manager", "boss", "tweet", "memo", "fax", "invite", "invitation",
				"reminder", "him", "her", "them", "channel", "slack", "discord", "users", "gp", "carer",
				"caregiver", "relatives", "press", "public"),
		}},
		handoff: "To send a message or an email, the agent that sends it requests it with confirm_action, and an approver decides here.",
	},
	{
		family: FamilyPayments,
		rules: []gateRule{
			{
				verbs: wordSet("pay", "paid", "paying", "transfer", "transferred", "wire", "wired", "refund",
					"refunded", "charge", "charged", "remit", "reimburse", "reimbursed", "spend", "buy", "bought",
					"purchase", "purchased", "settle", "invoice"),
				nouns: wordSet("money", "payment", "payments", "funds", "fund", "dollars", "euros", "pounds", "usd",
					"eur", "gbp", "cash", "vendor", "vendors", "supplier", "suppliers", "invoice", "invoices",
					"bill", "bills", "salary", "salaries", "payroll", "refund", "fee", "fees", "card", "account",
					"bitcoin", "crypto", "customer", "customers", "client", "amount", "balance", "k"),
			},
			{
				verbs: wordSet("send", "sent", "move", "moved"),
				nouns: wordSet("money", "funds", "payment", "payments", "dollars", "euros", "pounds", "usd", "eur",
					"gbp", "cash", "bitcoin", "crypto"),
			},
		},
		handoff: "To pay, transfer or refund money, the agent that owns payments requests it with confirm_action, and an approver decides here.",
	},
	{
		family: FamilyDocuments,
		rules: []gateRule{{
			verbs: wordSet("classify", "classified", "classifying", "categorize", "categorise", "categorized",
				"categorised", "file", "filed", "filing", "process", "processed", "processing", "extract",
				"extracted", "scan", "scanned", "archive", "archived", "upload", "uploaded", "enter", "entered",
				"book", "booked", "post", "posted", "code", "coded", "submit", "submitted", "sign", "signed",
				"review", "reviewed", "read", "parse", "parsed", "ocr", "import", "imported", "tag", "tagged",
				"sort", "route", "routed", "reconcile", "reconciled", "index", "indexed", "log", "logged",
				"summarize", "summarise", "summarized", "summarised", "fill", "complete", "draft", "prepare",
				"translate", "digitize", "attach", "match", "record"),
			nouns: wordSet("invoice", "invoices", "receipt", "receipts", "bill", "bills", "document", "documents",
				"doc", "docs", "statement", "statements", "contract", "contracts", "expense", "expenses", "po",
				"claim", "claims", "form", "forms", "attachment", "attachments", "pdf", "pdfs", "ledger",
				"journal", "entry", "entries", "timesheet", "timesheets", "report", "reports", "referral",
				"referrals", "letter", "paperwork", "spreadsheet", "csv", "payslip", "payroll", "quote",
				"quotes", "estimate", "transaction", "transactions", "scan", "upload", "note", "notes",
				"discharge", "summary", "lab", "labs", "results"),
		}},
		handoff: "To classify, file or process a document, the agent that owns document intake does it; if a step needs sign-off, it asks here with confirm_action.",
	},
	{
		family: FamilyCode,
		rules: []gateRule{
			{
				verbs: wordSet("merge", "merged", "merging", "push", "pushed", "pushing", "forcepush", "commit",
					"committed", "revert", "reverted", "rebase", "rebased", "refactor", "fix", "fixed", "fixing",
					"patch", "edit", "edited", "write", "rewrite", "change", "modify", "modified", "update",
					"implement", "debug", "build", "compile", "run", "approve", "review", "lgtm", "close",
					"open", "deploy"),
				nouns: wordSet("code", "codebase", "pr", "prs", "mr", "branch", "branches", "main", "master", "repo",
					"repository", "commit", "commits", "bug", "bugs", "function", "method", "class", "module",
					"script", "scripts", "test", "tests", "diff", "feature", "config", "configuration",
					"dockerfile", "yaml", "css", "html", "query", "sql", "github", "gitlab", "git", "ci", "issue",
					"issues", "ticket", "tickets", "jira", "lint", "unit"),
			},
		},
		handoff: "To change, merge or push code, your coding agent or your code review does it; a risky step can be put to an approver here with confirm_action.",
	},
	{
		family: FamilyMemory,
		rules: []gateRule{{
			verbs: wordSet("remember", "store", "save", "saved", "record", "set", "update", "updated", "change",
				"edit", "modify", "overwrite", "correct", "forget", "add", "note", "write", "insert", "retract",
				"mark", "clear", "memorize", "memorise"),
			nouns: wordSet("memory", "memories", "fact", "facts", "value", "values", "slot", "slots", "allergy",
				"allergies", "note", "preference", "preferences", "state"),
		}},
		leading: wordSet("remember", "memorize", "memorise"),
		phrases: wordSeqs("note that", "make a note", "keep in mind", "take note"),
		handoff: "To record or change a fact, an agent writes it with remember; a change to a confirm-required slot then waits here for a person with the approve role. `history <subject>` shows what is stored.",
	},
	{
		family: FamilyAccess,
		rules: []gateRule{{
			verbs: wordSet("add", "added", "create", "created", "grant", "granted", "give", "make", "promote",
				"revoke", "revoked", "remove", "map", "mapped", "register", "invite", "enable", "assign",
				"elevate", "upgrade", "rotate", "reset", "issue", "generate", "change"),
			nouns: wordSet("admin", "admins", "administrator", "role", "roles", "permission", "permissions",
				"access", "key", "keys", "apikey", "principal", "principals", "approver", "approvers",
				"member", "members", "privileges", "privilege", "rights", "token", "tokens", "password",
				"credentials", "scope", "scopes", "superuser", "root", "sudo"),
		}},
		handoff: "To get access or a role, ask an admin: they map chat users under principals: in config.yaml and create API keys with countersign keys create.",
	},
	{
		family: FamilyGeneral,
		rules: []gateRule{{
			verbs: wordSet("write", "tell", "compose", "draft", "generate", "make", "create", "sing", "give",
				"recommend", "suggest", "find", "plan", "book", "order", "cook"),
			nouns: wordSet("poem", "poems", "story", "stories", "joke", "jokes", "essay", "essays", "song", "songs",
				"haiku", "limerick", "recipe", "recipes", "riddle", "riddles", "movie", "movies", "restaurant",
				"restaurants", "flight", "flights", "hotel", "vacation", "holiday", "lunch", "dinner", "pizza",
				"weather"),
		}},
		phrases: wordSeqs("the weather", "the meaning of life"),
		handoff: "For writing, recommendations or general questions, use a general-purpose assistant; I only record and route approvals.",
	},
}
