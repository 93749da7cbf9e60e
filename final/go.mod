module github.com/kafkaworkbook/workbook/final

go 1.26.0
