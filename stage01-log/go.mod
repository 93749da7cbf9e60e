module github.com/kafkaworkbook/workbook/stage01-log

go 1.26.0

require (
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
