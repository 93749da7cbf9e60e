module github.com/kafkaworkbook/workbook/final

go 1.26.0

require github.com/stretchr/testify v1.12.1
