"""W17: what the console hands to teams that run Prometheus and Grafana (the dashboard JSON here;
the alert-rule YAML is the alerts app's, ``alerts.prometheus_rules``)."""
