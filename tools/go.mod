module github.com/countersign/countersign/tools

go 1.26.8

require github.com/CycloneDX/cyclonedx-go v0.9.3
