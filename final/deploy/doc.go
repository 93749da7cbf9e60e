// Package deploy holds the Compose file of a cluster of the final broker
// (compose.yaml: three ZooKeeper nodes, three brokers and Prometheus on one
// network, from the images scripts/images.sh builds) and the configuration
// files it mounts. It has no Go code: its test runs the Compose file with
// the docker-compose Debian ships, as a reader would, and checks that the
// cluster it starts replicates and serves clients on 127.0.0.1.
// docs/operations.md is the guide to running it.
package deploy
