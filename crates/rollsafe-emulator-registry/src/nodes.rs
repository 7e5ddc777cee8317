//! The simulated cluster's nodes. There are no Node objects: the names are what pods are bound
//! to (`spec.nodeName`), DaemonSets run one pod on each, and other pods are spread over them.

/// The simulated nodes, in scheduling order.
pub const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
