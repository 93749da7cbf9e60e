module github.com/kafkaworkbook/workbook/tools

go 1.26.0
