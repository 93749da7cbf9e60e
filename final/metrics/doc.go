// Package metrics exports a broker's metrics to Prometheus under the names
// Kafka's MBeans get from the JMX exporter's common Kafka rules: the
// domain, the type and the name, lowercased and joined by underscores
// (kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions is
// kafka_server_replicamanager_underreplicatedpartitions); a meter (…PerSec)
// is a counter named without PerSec and with _total; a …Percent is a gauge
// with _percent; the MBean's other keys are labels with Kafka's names.
// Kafka's timers and histograms (…TimeMs) are Prometheus histograms in
// milliseconds, whose _count is the exporter's _count.
//
// Nothing is counted twice: the gauges and most counters are read from the
// broker at scrape time (brokerCollector), from seams in the stage that
// owns each value; only the request and flush times are observed as they
// happen, through the broker's request observer and commitlog's flush
// observer.
//
//	MBean (kafka.<domain>:type=…,name=…)                       Prometheus name                                                     type       labels            read from
//	server ReplicaManager UnderReplicatedPartitions            kafka_server_replicamanager_underreplicatedpartitions               gauge                        replica.Manager partitions led with ISR < replicas
//	server ReplicaManager PartitionCount                       kafka_server_replicamanager_partitioncount                          gauge                        replica.Manager.Partitions
//	server ReplicaManager LeaderCount                          kafka_server_replicamanager_leadercount                             gauge                        Partition.Role
//	server ReplicaManager IsrShrinksPerSec                     kafka_server_replicamanager_isrshrinks_total                        counter                      isr.Manager.Shrinks
//	server ReplicaManager IsrExpandsPerSec                     kafka_server_replicamanager_isrexpands_total                        counter                      isr.Manager.Expands
//	controller KafkaController ActiveControllerCount           kafka_controller_kafkacontroller_activecontrollercount              gauge                        controller.IsActive
//	controller KafkaController OfflinePartitionsCount          kafka_controller_kafkacontroller_offlinepartitionscount             gauge                        controller.StateMachines (controller only)
//	controller KafkaController GlobalPartitionCount            kafka_controller_kafkacontroller_globalpartitioncount               gauge                        controller.StateMachines (controller only)
//	server BrokerTopicMetrics BytesInPerSec[,topic]            kafka_server_brokertopicmetrics_bytesin_total                       counter    topic ("": all)   broker.Counters
//	server BrokerTopicMetrics BytesOutPerSec[,topic]           kafka_server_brokertopicmetrics_bytesout_total                      counter    topic ("": all)   broker.Counters
//	server BrokerTopicMetrics MessagesInPerSec[,topic]         kafka_server_brokertopicmetrics_messagesin_total                    counter    topic ("": all)   broker.Counters
//	server BrokerTopicMetrics FailedProduceRequestsPerSec      kafka_server_brokertopicmetrics_failedproducerequests_total         counter                      broker.Counters
//	server BrokerTopicMetrics InvalidMessageCrcRecordsPerSec   kafka_server_brokertopicmetrics_invalidmessagecrcrecords_total      counter                      broker.Counters
//	server BrokerTopicMetrics InvalidOffsetOrSequenceRecords…  kafka_server_brokertopicmetrics_invalidoffsetorsequencerecords_total counter                   broker.Counters
//	network RequestChannel RequestQueueSize                    kafka_network_requestchannel_requestqueuesize                       gauge                        network.Stats.QueueDepth
//	network SocketServer NetworkProcessorAvgIdlePercent        kafka_network_socketserver_networkprocessoravgidle_percent          gauge (0-1)                  network.Stats.ProcessorIdle
//	server KafkaRequestHandlerPool RequestHandlerAvgIdlePercent kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent gauge (0-1)                 network.Stats.HandlerIdle
//	network RequestMetrics RequestsPerSec,request,version      kafka_network_requestmetrics_requests_total                         counter    request, version  broker.ObserveRequests
//	network RequestMetrics TotalTimeMs,request                 kafka_network_requestmetrics_totaltimems                            histogram  request           broker.ObserveRequests
//	network RequestMetrics RequestQueueTimeMs,request          kafka_network_requestmetrics_requestqueuetimems                     histogram  request           broker.ObserveRequests
//	network RequestMetrics LocalTimeMs,request                 kafka_network_requestmetrics_localtimems                            histogram  request           broker.ObserveRequests
//	network RequestMetrics RemoteTimeMs,request                kafka_network_requestmetrics_remotetimems                           histogram  request           broker.ObserveRequests
//	network RequestMetrics ResponseSendTimeMs,request          kafka_network_requestmetrics_responsesendtimems                     histogram  request           broker.ObserveRequests
//	server DelayedOperationPurgatory PurgatorySize             kafka_server_delayedoperationpurgatory_purgatorysize                gauge      delayedOperation  purgatory.Watched
//	server DelayedOperationPurgatory NumDelayedOperations      kafka_server_delayedoperationpurgatory_numdelayedoperations         gauge      delayedOperation  purgatory.Delayed
//	log LogFlushStats LogFlushRateAndTimeMs                    kafka_log_logflushstats_logflushrateandtimems                       histogram                    commitlog.ObserveFlushes
//	server KafkaServer BrokerState                             kafka_server_kafkaserver_brokerstate                                gauge                        Broker.ShuttingDown
//
// Where ours differ from Kafka's:
//   - request is the API's name (Produce, Fetch, Metadata, ...), and a Fetch
//     is counted twice, as Fetch and as FetchConsumer or FetchFollower, as
//     Kafka does. ResponseSendTimeMs holds Kafka's ResponseQueueTimeMs too:
//     from the answer handed to the network layer to its last byte written.
//   - delayedOperation is Produce and Fetch (stage 04) and Rebalance and
//     Heartbeat (stage 05's group coordinator).
//   - The idle percentages are over the time since the previous scrape
//     (Kafka's are a meter's rates). NetworkProcessorAvgIdlePercent
//     averages the reactor's Processors of every listener; a TLS listener
//     runs on the portable transport, which has none, and a broker of TLS
//     listeners only has no such gauge.
//   - BrokerState is 3 (RunningAsBroker) or, once shutdown began, 7
//     (BrokerShuttingDown).
//   - LogFlushRateAndTimeMs counts every log of the process, as Kafka's
//     counts every log of the JVM: brokers sharing a process (tests) see
//     each other's flushes.
//   - A deleted topic's BrokerTopicMetrics series stay (Kafka removes them).
//   - Go's runtime and process metrics (go_*, process_*) stand where the JMX
//     exporter puts the JVM's.
//
// New registers the collectors in a registry of the broker's own (before
// the broker starts); Handler serves it with promhttp and Serve listens on
// an address: final's broker serves it where metrics.prometheus.listener
// (KeyListener) says.
package metrics
