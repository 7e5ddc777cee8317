//! What kube-controller-manager puts in a new namespace: the `default` ServiceAccount (the
//! serviceaccounts controller) and the `kube-root-ca.crt` ConfigMap with the API server's CA
//! (the root-ca-cert-publisher), each unless it exists already.

use serde_json::json;

use crate::store::Store;
use rollsafe_emulator_types::resources::ids;

/// The ConfigMap with the API server's CA in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// Its description, as the real publisher writes it.
const ROOT_CA_DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

/// Populates the namespace `ns`, just created, publishing `root_ca` in it.
pub fn populate(store: &mut Store, ns: &str, root_ca: &str) {
    if store.get(ids::SERVICEACCOUNTS, ns, "default").is_none() {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default", "namespace": ns}});
        store.put_controlled(ids::SERVICEACCOUNTS, ns, "default", account, None);
    }
    if store.get(ids::CONFIGMAPS, ns, ROOT_CA_CONFIGMAP).is_none() {
        let bundle = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns,
                         "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION}},
            "data": {"ca.crt": root_ca}});
        store.put_controlled(ids::CONFIGMAPS, ns, ROOT_CA_CONFIGMAP, bundle, None);
    }
}
