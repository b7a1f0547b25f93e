// Package deploy holds edgebase's deployment files and the tests that keep
// them honest; it has no code of its own.
//
//   - nomad/edgebase.nomad.hcl: a Nomad job, three voters and one edge node.
//   - nomad/edgebase-regions.nomad.hcl: the same cluster across regions
//     us/eu/ap (voters 2 us + 1 eu, one edge node per region, --wan),
//     instead of edgebase.nomad.hcl (docs/edge.md).
//   - compose-regions.yml: the region layout for Docker Swarm
//     (node.labels.region placement); plain compose runs it on one machine.
//   - prometheus/alerts.yml and alerts_test.yml: alert rules and their
//     promtool unit tests; prometheus/prometheus.yml: the scrape
//     configuration of docker-compose.yml's "monitoring" profile;
//     prometheus/Dockerfile and stage-rootfs.sh: its FROM scratch image.
//   - grafana/edgebase-dashboard.json: a Grafana dashboard.
//   - compose.env: the development secrets docker-compose.yml reads.
//
// go test ./deploy parses the Nomad job with hashicorp/hcl and checks its
// structure against the binary's flags, runs promtool on the Prometheus
// files (skipped without promtool unless EDGEBASE_REQUIRE_PROMTOOL=1), and
// checks that every metric the dashboard and the alerts use is one a real
// node exports. regions_test.go checks the two region files (and renders
// the stack with docker-compose config / docker stack config when present).
package deploy
