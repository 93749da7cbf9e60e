// Package final is the workbook's last module: the broker people deploy.
// It adds integration only (chapter 7): one configuration with Kafka's
// keys, several listeners with TLS and SASL, Prometheus metrics, structured
// logs, the broker command and an admin command. Every mechanism it wires
// together lives in the stage that teaches it; where final needed one that
// was missing, it went into that stage.
package final
