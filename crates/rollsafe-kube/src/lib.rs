//! Talking to Kubernetes: per-caller clients, the budgeted paged inventory and the restart executor.
