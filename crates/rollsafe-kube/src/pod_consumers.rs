//! What the consumers preview reads beyond the discovery of the three workload kinds: the pods
//! that consume the Secret and belong to no Deployment, StatefulSet or DaemonSet
//! ([`PodConsumers`]), and the Secret's own `rollsafe.dev/strategy`.
//!
//! The pods are read on demand, once per preview, as the caller: the eviction strategy's paged
//! list ([`eviction::consuming_pods`]: pages of [`eviction::POD_PAGE_SIZE`], at most
//! [`eviction::MAX_POD_PAGES`]), reduced to names and owners. Nothing is cached. A list the
//! identity may not make (403) does not fail the preview: the pod-level consumers are said to
//! be not readable, and the rule that would let it is named (`list pods`).

use std::collections::BTreeMap;

use rollsafe_core::annotations::STRATEGY;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::preview::{
    ConsumersPreview, ConsumingPodRef, POD_TEMPLATE_HASH, PodConsumers, PodsUnread,
};
use rollsafe_core::strategy::{Strategy, StrategyError};
use tracing::debug;

use crate::Discovery;
use crate::eviction::{self, EvictionError, MAX_POD_PAGES, POD_PAGE_SIZE};

/// The pods of `namespace` that consume `secret` and belong to no Deployment, StatefulSet or
/// DaemonSet, read as `client`; or why they could not be read.
pub async fn pod_consumers(
    client: &kube::Client,
    namespace: &Namespace,
    secret: &SecretName,
) -> PodConsumers {
    match eviction::consuming_pods(client, namespace, secret).await {
        Ok(pods) => PodConsumers::of(pods.iter().map(|pod| ConsumingPodRef {
            name: &pod.view.name,
            owner: pod.owner.as_ref(),
            pod_template_hash: pod.labels.get(POD_TEMPLATE_HASH).map(String::as_str),
        })),
        Err(error) => {
            debug!(
                code = error.code(),
                "the pods could not be listed for the preview"
            );
            PodConsumers::unread(unread(error))
        }
    }
}

fn unread(error: EvictionError) -> PodsUnread {
    match error {
        EvictionError::Forbidden => PodsUnread::Forbidden,
        EvictionError::Http(status) => PodsUnread::Status(status),
        EvictionError::NoAnswer => PodsUnread::NoAnswer,
        EvictionError::TooManyPods => {
            let page = usize::try_from(POD_PAGE_SIZE).unwrap_or(usize::MAX);
            PodsUnread::TooMany(page.saturating_mul(MAX_POD_PAGES))
        }
    }
}

/// The Secret's `rollsafe.dev/strategy`, from its annotations (`None`: it has none).
pub fn secret_strategy(
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<Result<Strategy, StrategyError>> {
    annotations?.get(STRATEGY).map(|value| value.parse())
}

/// The consumers preview of `discovery` with what only more reads give: the Secret's own
/// strategy (from its `annotations`, as the caller's preflight read them) applied to the
/// workloads that do not choose, and the pod-level consumers, read as `client` — `None` when
/// pods are not to be listed as the caller (constrained impersonation grants no such list):
/// nothing is sent, and they are said to be not readable.
pub async fn preview(
    discovery: &Discovery,
    client: Option<&kube::Client>,
    secret_annotations: Option<&BTreeMap<String, String>>,
) -> ConsumersPreview {
    let mut preview = discovery.preview();
    preview.secret_strategy(secret_strategy(secret_annotations));
    preview.pod_consumers = Some(match client {
        Some(client) => pod_consumers(client, &discovery.namespace, &discovery.secret).await,
        None => PodConsumers::unread(PodsUnread::NotGranted),
    });
    preview
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::preview::PodsRead;

    #[test]
    fn each_list_failure_is_said_and_none_fails_the_preview() {
        let cases = [
            (EvictionError::Forbidden, PodsRead::NotReadable, "forbidden"),
            (EvictionError::Http(500), PodsRead::NotRead, "http_error"),
            (EvictionError::NoAnswer, PodsRead::NotRead, "unavailable"),
            (EvictionError::TooManyPods, PodsRead::NotRead, "pod_budget"),
        ];
        for (error, state, code) in cases {
            let said = PodConsumers::unread(unread(error));
            assert_eq!((said.state, said.code.as_deref()), (state, Some(code)));
        }
        assert!(
            PodConsumers::unread(unread(EvictionError::TooManyPods))
                .message
                .is_some_and(|m| m.contains("(10000)"))
        );
    }

    #[test]
    fn the_secrets_strategy_is_its_annotation() {
        let with = |value: &str| BTreeMap::from([(STRATEGY.to_owned(), value.to_owned())]);
        assert_eq!(
            secret_strategy(Some(&with("evict"))),
            Some(Ok(Strategy::Evict))
        );
        assert!(matches!(
            secret_strategy(Some(&with("delete"))),
            Some(Err(_))
        ));
        assert_eq!(secret_strategy(Some(&BTreeMap::new())), None);
        assert_eq!(secret_strategy(None), None);
    }
}
