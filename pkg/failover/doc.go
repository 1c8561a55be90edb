// Package failover holds the failover test of issue 30 (API.md §19): the service on a
// Patroni pair whose primary is killed under load (make test-ha). It has no code of
// its own; what it tests lives in pkg/store, pkg/notify, pkg/mqtt and testcontainers.
package failover
