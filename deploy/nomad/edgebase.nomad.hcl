# edgebase on Nomad: three Raft voters and one non-voting edge node.
#
#   nomad var put nomad/jobs/edgebase \
#     admin_token="$(openssl rand -hex 32)" \
#     cluster_secret="$(openssl rand -hex 32)" \
#     secret_key="$(openssl rand -hex 32)"
#   nomad job run -var image=registry.example.com/edgebase:1.2.3 deploy/nomad/edgebase.nomad.hcl
#
# Requirements on the Nomad clients:
#
#   - the docker driver, and a host volume named "edgebase-data" on every
#     client that may run a node (client { host_volume "edgebase-data" {
#     path = "/srv/edgebase" read_only = false } }), writable by uid 65532
#     (the image's user);
#   - static ports free on the host's address: 8080 (HTTP) and 7000 (Raft)
#     for a voter, 8081 and 7001 for the edge node. A node advertises
#     HOST_IP:PORT, so the address Raft stores for it stays the same when
#     the allocation is replaced on the same client (rolling updates;
#     ephemeral_disk.sticky asks for that client).
#
# Identity and data: a node's id is its group and allocation index (voter-0,
# voter-1, voter-2, edge-0); its data lives in a directory of that name on the
# host volume. An allocation that Nomad reschedules onto another client starts
# there without state and joins the cluster again under the same id (the
# leader records its new Raft address and sends it a snapshot). A client that
# still holds an older directory of that id would start it from that stale
# state: delete such a directory before the allocation comes back to it.
#
# Bootstrap: voter-0 bootstraps a new cluster when no other edgebase node is
# registered. Every other node waits in a prestart task ("await-cluster")
# until a registered node answers /healthz, then starts with that list as
# EDGEBASE_JOIN. A node that already has state ignores both (it never
# bootstraps or joins twice).
#
# Secrets come from the Nomad variable nomad/jobs/edgebase (readable by this
# job through its workload identity), rendered into the task's secrets
# directory: they never appear in this file or in the job's environment
# block. Put the same values on every node of a cluster.
#
# Metrics: every node registers the service "edgebase" with the tags
# "metrics" and its role. A Prometheus with Nomad service discovery scrapes
# them as job "edgebase" (the name deploy/prometheus/alerts.yml selects):
#
#   scrape_configs:
#     - job_name: edgebase
#       nomad_sd_configs: [{ server: "http://127.0.0.1:4646" }]
#       relabel_configs:
#         - { source_labels: [__meta_nomad_service], regex: edgebase, action: keep }
#         - { source_labels: [__meta_nomad_tags], regex: ".*,metrics,.*", action: keep }
#
# go test ./deploy parses this file and checks its structure.

variable "image" {
  type        = string
  default     = "edgebase:dev"
  description = "The edgebase image (built FROM scratch by `make image`)."
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "log_level" {
  type    = string
  default = "info"
}

job "edgebase" {
  type        = "service"
  datacenters = var.datacenters

  # One node at a time, and the next only once the replaced one passes its
  # /readyz check (joined, leader known, caught up) for min_healthy_time: the
  # voters keep their quorum through a rolling update.
  update {
    max_parallel      = 1
    health_check      = "checks"
    min_healthy_time  = "20s"
    healthy_deadline  = "5m"
    progress_deadline = "10m"
    stagger           = "30s"
    auto_revert       = true
  }

  group "voter" {
    count = 3

    # One voter per client: losing a client loses one vote.
    constraint {
      operator = "distinct_hosts"
      value    = "true"
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

    # Prefer the client that ran the previous allocation: the node's data and
    # advertised address are there.
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
    # bootstraps). Exits as soon as it can: the server task starts after it.
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
        args  = ["serve"]
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

      # The join list: every other registered node. Read on the first start
      # only (a node with state ignores it), so a change in the list never
      # restarts the node.
      template {
        destination = "local/join.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $urls := "" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}
          {{- if ne $urls "" }}{{ $urls = printf "%s," $urls }}{{ end -}}
          {{- $urls = printf "%shttp://%s:%d" $urls .Address .Port -}}
          {{- end -}}
          {{- end }}
          EDGEBASE_JOIN={{ $urls }}
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
    count = 1

    # Ports of its own, so that the edge node may share a client with a voter.
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
        args  = ["serve"]
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
        EDGEBASE_EDGE           = "true"
        EDGEBASE_HTTP_ADDR      = ":8080"
        EDGEBASE_RAFT_ADDR      = ":7000"
        EDGEBASE_ADVERTISE_HTTP = "http://${NOMAD_ADDR_http}"
        EDGEBASE_ADVERTISE_RAFT = "${NOMAD_ADDR_raft}"
        EDGEBASE_LOG_LEVEL      = var.log_level
      }

      template {
        destination = "local/join.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- $self := env "NOMAD_ALLOC_ID" -}}
          {{- $urls := "" -}}
          {{- range nomadService "edgebase" -}}
          {{- if ne .AllocID $self -}}
          {{- if ne $urls "" }}{{ $urls = printf "%s," $urls }}{{ end -}}
          {{- $urls = printf "%shttp://%s:%d" $urls .Address .Port -}}
          {{- end -}}
          {{- end }}
          EDGEBASE_JOIN={{ $urls }}
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
