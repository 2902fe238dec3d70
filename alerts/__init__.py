"""Alerts (W15): rules over the metric history with a scope, evaluated after each sample; events
pending → firing → resolved, acknowledged and silenced by operators; webhook and e-mail
notifications; everything audited."""
