"""What the console's pages show and do, worked out over the admin client and the SDK producer
(no Django here): cluster and message queries, dead letters, delayed messages, pending
transactions, a message's trace, test sends, the broker-config rows. Views stay thin around them;
the clients they are handed come from ``core.cluster_access``."""
