module github.com/kafkaworkbook/workbook/stage03-replication

go 1.26.0

require (
	github.com/kafkaworkbook/workbook/stage01-log v0.0.0
	github.com/kafkaworkbook/workbook/stage02-reactor v0.0.0
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace (
	github.com/kafkaworkbook/workbook/stage01-log => ../stage01-log
	github.com/kafkaworkbook/workbook/stage02-reactor => ../stage02-reactor
)
