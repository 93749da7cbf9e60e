module github.com/kafkaworkbook/workbook/final

go 1.26.0

require (
	github.com/go-zookeeper/zk v1.0.4 // indirect
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)
