module github.com/countersign/countersign

go 1.26.8

require (
	github.com/bwmarrin/discordgo v0.29.0 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/modelcontextprotocol/go-sdk v1.8.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/slack-go/slack v0.35.0 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
