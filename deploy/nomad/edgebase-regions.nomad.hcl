# edgebase on Nomad across three regions: three Raft voters (two in us, one
# in eu) and one non-voting edge node in each of us, eu and ap.
#
# Run it INSTEAD of edgebase.nomad.hcl, not beside it: it is the same job
# ("edgebase"), the same service name and the same Nomad variable.
#
#   nomad var put nomad/jobs/edgebase \
#     admin_token="$(openssl rand -hex 32)" \
#     cluster_secret="$(openssl rand -hex 32)" \
#     secret_key="$(openssl rand -hex 32)"
#   nomad job run -var image=registry.example.com/edgebase:1.2.3 \
#     deploy/nomad/edgebase-regions.nomad.hcl
#
# Regions are Nomad datacenters of ONE Nomad region (a Nomad "region" is a
# separate cluster of servers; Nomad's native service discovery, which the
# join list below reads, works across the datacenters of one region). Name
# the datacenters us, eu and ap (client { datacenter = "eu" }), or edit the
# three names in the constraints and the spread below.
#
# Requirements on the Nomad clients, beyond those of edgebase.nomad.hcl (the
# docker driver, a host volume "edgebase-data" writable by uid 65532):
#
#   - the address Nomad fingerprints for a client (its network_interface)
#     must be reachable from the other regions on the static ports: 8080
#     (HTTP) and 7000 (Raft) for a voter, 8081 and 7001 for an edge node. A
#     node advertises HOST_IP:PORT. Keep these links on a private network
#     (VPN or peering between the regions): node-to-node calls carry the
#     cluster secret, and Raft is plain TCP unless --raft-tls-* is given.
#   - us and eu need at least two and one clients able to run a voter (one
#     voter per client); each of us, eu and ap one client for its edge node.
#
# Placement and why:
#
#   - The voters are ONE group, not one group per region: Nomad's update
#     block works per group, and groups update in parallel, so separate
#     groups would restart a us voter and the eu voter at the same time (two
#     of three votes gone). One group with max_parallel = 1 replaces one
#     voter at a time, in whichever region.
#   - Voters go to us or eu only, at most two per datacenter
#     (distinct_property), so three of them are 2 + 1; the spread asks for two
#     in us. With two voters in us the leader (usually in us) commits with
#     the other us voter, about 1 ms away, instead of waiting for eu (80 ms).
#     If us has only one eligible client the scheduler places two in eu:
#     quorum still holds, commits then pay the us-eu round trip.
#   - Edge nodes: exactly one per datacenter (distinct_property = 1 over us,
#     eu, ap). An edge's node id is edge-<datacenter>, so it keeps its id and
#     data directory when Nomad replaces it in its datacenter.
#
# Timing: every node runs with --wan (a Raft timing preset for inter-region
# round trips up to about 250 ms; docs/operations.md lists its values). For
# longer round trips or to override one value, pass explicit flags through
# the variable raft_flags (they win over the preset), e.g.
#
#   nomad job run -var 'raft_flags=["--wan","--raft-heartbeat-timeout=1500ms","--raft-election-timeout=2500ms"]' ...
#
# Joining: a new node asks the registered nodes of its own datacenter first,
# then the others. voter-0 bootstraps a new cluster when no other edgebase
# node is registered; every other node waits in "await-cluster" until one
# answers /healthz. A node with state ignores both.
#
# Secrets come from the Nomad variable nomad/jobs/edgebase, rendered into the
# task's secrets directory, never into this file or the env block.
#
# Metrics: every node registers the service "edgebase" tagged "metrics" and
# its role; Prometheus' Nomad service discovery gives the datacenter as
# __meta_nomad_dc (relabel it to a "region" label). docs/edge.md is the guide.
#
# go test ./deploy parses this file and checks its structure (regions_test.go).

variable "image" {
  type        = string
  default     = "edgebase:dev"
  description = "The edgebase image (built FROM scratch by `make image`)."
}

variable "datacenters" {
  type        = list(string)
  default     = ["us", "eu", "ap"]
  description = "The Nomad datacenters of the three regions (the constraints below name us, eu and ap)."
}

variable "raft_flags" {
  type        = list(string)
  default     = ["--wan"]
  description = "Raft timing flags for every node: the --wan preset, then explicit --raft-heartbeat-timeout, --raft-election-timeout, --raft-leader-lease-timeout, --raft-commit-timeout or --raft-trailing-logs values that override it."
}

variable "log_level" {
  type    = string
  default = "info"
}

job "edgebase" {
  type        = "service"
  datacenters = var.datacenters

  # One node at a time per group, the next only once the replaced one passes
  # /readyz for min_healthy_time. Across a WAN a node needs longer to catch
  # up: the deadlines are those of edgebase.nomad.hcl, doubled.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "30s"
    healthy_deadline  = "10m"
    progress_deadline = "20m"
    stagger           = "30s"
    auto_revert       = true
  }

  group "voter" {
    count = 3

    constraint {
      attribute = "${node.datacenter}"
      operator  = "set_contains_any"
      value     = "us,eu"
    }

    # At most two voters per datacenter: 2 + 1 over us and eu.
    constraint {
      operator  = "distinct_property"
      attribute = "${node.datacenter}"
      value     = "2"
    }

    # One voter per client: losing a client loses one vote.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
    }

    # Two of the three in us (the leader's quorum stays inside us).
    spread {
      attribute = "${node.datacenter}"
      weight    = 100

      target "us" {
        percent = 67
      }

      target "eu" {
        percent = 33
      }
    }

    network {
      port "http" {
        static = 8080
        to     = 8080
      }
      port "raft" {
        static = 7000
        to     = 7000
      }
    }

    volume "data" {
      type      = "host"
      source    = "edgebase-data"
      read_only = false
    }

    ephemeral_disk {
      sticky  = true
      migrate = false
      size    = 300
    }

    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    reschedule {
      delay          = "30s"
      delay_function = "exponential"
      max_delay      = "10m"
      unlimited      = true
    }

    service {
      name     = "edgebase"
      provider = "nomad"
      port     = "http"
      tags     = ["metrics", "voter"]

      check {
        name     = "readyz"
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "3s"
      }
    }

    # Waits until another registered node answers /healthz, unless this is
    # voter-0 and no node is registered at all (a brand-new cluster, which it
    # bootstraps).
    task "await-cluster" {
      driver = "docker"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      config {
        image = var.image
        args  = ["${AWAIT_COMMAND}"]
      }

      template {
        destination = "local/await.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $url := "" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}{{- $url = printf "http://%s:%d/healthz" .Address .Port -}}{{- end -}}
          {{- end -}}
          {{- if ne $url "" }}
          AWAIT_COMMAND=healthcheck
          EDGEBASE_URL={{ $url }}
          {{- else if eq (env "NOMAD_ALLOC_INDEX") "0" }}
          AWAIT_COMMAND=version
          {{- else }}
          # No node registered yet: fail, and try again after the restart delay.
          AWAIT_COMMAND=healthcheck
          EDGEBASE_URL=http://127.0.0.1:1/healthz
          {{- end }}
        EOT
      }

      restart {
        attempts = 60
        interval = "30m"
        delay    = "10s"
        mode     = "delay"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }

    task "edgebase" {
      driver = "docker"

      config {
        image = var.image
        args  = concat(["serve"], var.raft_flags)
        ports = ["http", "raft"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
        read_only   = false
      }

      env {
        EDGEBASE_NODE_ID        = "${NOMAD_GROUP_NAME}-${NOMAD_ALLOC_INDEX}"
        EDGEBASE_DATA_DIR       = "/data/${NOMAD_GROUP_NAME}-${NOMAD_ALLOC_INDEX}"
        EDGEBASE_HTTP_ADDR      = ":8080"
        EDGEBASE_RAFT_ADDR      = ":7000"
        EDGEBASE_ADVERTISE_HTTP = "http://${NOMAD_ADDR_http}"
        EDGEBASE_ADVERTISE_RAFT = "${NOMAD_ADDR_raft}"
        EDGEBASE_LOG_LEVEL      = var.log_level
      }

      # The join list: the registered nodes of this datacenter first, then
      # the others (a node asks them in turn; a trailing comma is ignored).
      # Read on the first start only, so a change never restarts the node.
      template {
        destination = "local/join.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $dc := env "NOMAD_DC" -}}
          {{- $near := "" -}}
          {{- $far := "" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}
          {{- if eq .Datacenter $dc -}}
          {{- $near = printf "%shttp://%s:%d," $near .Address .Port -}}
          {{- else -}}
          {{- $far = printf "%shttp://%s:%d," $far .Address .Port -}}
          {{- end -}}
          {{- end -}}
          {{- end }}
          EDGEBASE_JOIN={{ $near }}{{ $far }}
        EOT
      }

      template {
        destination = "secrets/edgebase.env"
        env         = true
        change_mode = "restart"
        splay       = "60s"
        perms       = "0400"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/edgebase" }}
          EDGEBASE_ADMIN_TOKEN={{ .admin_token | toJSON }}
          EDGEBASE_CLUSTER_SECRET={{ .cluster_secret | toJSON }}
          {{- end }}
          EDGEBASE_SECRET_KEY_FILE=/secrets/secret-key
        EOT
      }

      # Readable by the image's user only.
      template {
        destination = "secrets/secret-key"
        change_mode = "restart"
        splay       = "60s"
        uid         = 65532
        gid         = 65532
        perms       = "0400"
        data        = "{{ with nomadVar \"nomad/jobs/edgebase\" }}{{ .secret_key }}{{ end }}"
      }

      # SIGTERM hands leadership over and closes cleanly (up to 20s).
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 1000
        memory = 1024
      }
    }
  }

  group "edge" {
    count = 3

    constraint {
      attribute = "${node.datacenter}"
      operator  = "set_contains_any"
      value     = "us,eu,ap"
    }

    # Exactly one edge node per datacenter: three over us, eu and ap. If a
    # region has no eligible client its edge stays pending rather than
    # doubling up elsewhere.
    constraint {
      operator  = "distinct_property"
      attribute = "${node.datacenter}"
      value     = "1"
    }

    # Ports of its own, so that an edge node may share a client with a voter.
    network {
      port "http" {
        static = 8081
        to     = 8080
      }
      port "raft" {
        static = 7001
        to     = 7000
      }
    }

    volume "data" {
      type      = "host"
      source    = "edgebase-data"
      read_only = false
    }

    ephemeral_disk {
      sticky  = true
      migrate = false
      size    = 300
    }

    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    reschedule {
      delay          = "30s"
      delay_function = "exponential"
      max_delay      = "10m"
      unlimited      = true
    }

    service {
      name     = "edgebase"
      provider = "nomad"
      port     = "http"
      tags     = ["metrics", "edge"]

      check {
        name     = "readyz"
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "3s"
      }
    }

    task "await-cluster" {
      driver = "docker"

      lifecycle {
        hook    = "prestart"
        sidecar = false
      }

      config {
        image = var.image
        args  = ["healthcheck"]
      }

      # An edge node never bootstraps: it always waits for a registered node.
      template {
        destination = "local/await.env"
        env         = true
        change_mode = "restart"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $url := "http://127.0.0.1:1/healthz" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}{{- $url = printf "http://%s:%d/healthz" .Address .Port -}}{{- end -}}
          {{- end }}
          EDGEBASE_URL={{ $url }}
        EOT
      }

      restart {
        attempts = 60
        interval = "30m"
        delay    = "10s"
        mode     = "delay"
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }

    task "edgebase" {
      driver = "docker"

      config {
        image = var.image
        args  = concat(["serve"], var.raft_flags)
        ports = ["http", "raft"]
      }

      volume_mount {
        volume      = "data"
        destination = "/data"
        read_only   = false
      }

      env {
        EDGEBASE_NODE_ID        = "${NOMAD_GROUP_NAME}-${NOMAD_DC}"
        EDGEBASE_DATA_DIR       = "/data/${NOMAD_GROUP_NAME}-${NOMAD_DC}"
        EDGEBASE_EDGE           = "true"
        EDGEBASE_HTTP_ADDR      = ":8080"
        EDGEBASE_RAFT_ADDR      = ":7000"
        EDGEBASE_ADVERTISE_HTTP = "http://${NOMAD_ADDR_http}"
        EDGEBASE_ADVERTISE_RAFT = "${NOMAD_ADDR_raft}"
        EDGEBASE_LOG_LEVEL      = var.log_level
      }

      # The join list: this datacenter's nodes first (none for ap), then the
      # others.
      template {
        destination = "local/join.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $dc := env "NOMAD_DC" -}}
          {{- $near := "" -}}
          {{- $far := "" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}
          {{- if eq .Datacenter $dc -}}
          {{- $near = printf "%shttp://%s:%d," $near .Address .Port -}}
          {{- else -}}
          {{- $far = printf "%shttp://%s:%d," $far .Address .Port -}}
          {{- end -}}
          {{- end -}}
          {{- end }}
          EDGEBASE_JOIN={{ $near }}{{ $far }}
        EOT
      }

      template {
        destination = "secrets/edgebase.env"
        env         = true
        change_mode = "restart"
        splay       = "60s"
        perms       = "0400"
        data        = <<-EOT
          {{- with nomadVar "nomad/jobs/edgebase" }}
          EDGEBASE_ADMIN_TOKEN={{ .admin_token | toJSON }}
          EDGEBASE_CLUSTER_SECRET={{ .cluster_secret | toJSON }}
          {{- end }}
          EDGEBASE_SECRET_KEY_FILE=/secrets/secret-key
        EOT
      }

      # Readable by the image's user only.
      template {
        destination = "secrets/secret-key"
        change_mode = "restart"
        splay       = "60s"
        uid         = 65532
        gid         = 65532
        perms       = "0400"
        data        = "{{ with nomadVar \"nomad/jobs/edgebase\" }}{{ .secret_key }}{{ end }}"
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 512
      }
    }
  }
}
