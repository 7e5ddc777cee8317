//! The access-rules ConfigMap, read as the server itself and cached for 60 s.
//!
//! A missing ConfigMap (or one without `access.json`) is cached as "no rules", a malformed one
//! as "deny non-admins". A failed read is not cached: the request fails with the sanitized 500
//! and the next request reads again.

use std::time::{Duration, Instant};

use rollsafe_core::name::{ConfigMapName, Namespace};
use rollsafe_kube::{Connection, ReadError, read_config_map};
use tokio::sync::Mutex;
use tracing::warn;

use crate::acl::{ACCESS_KEY, AccessRules};

/// How long access rules are reused.
pub const ACCESS_RULES_TTL: Duration = Duration::from_secs(60);

/// The cached rules of one ConfigMap.
#[derive(Debug)]
pub struct AccessRulesCache {
    namespace: Namespace,
    name: ConfigMapName,
    ttl: Duration,
    read_timeout: Duration,
    cached: Mutex<Option<(Instant, AccessRules)>>,
}

impl AccessRulesCache {
    /// A cache of ConfigMap `name` in `namespace`, read within `read_timeout` (the engine's
    /// single-object read timeout).
    pub fn new(
        namespace: Namespace,
        name: ConfigMapName,
        ttl: Duration,
        read_timeout: Duration,
    ) -> Self {
        Self {
            namespace,
            name,
            ttl,
            read_timeout,
            cached: Mutex::new(None),
        }
    }

    /// The current rules, read as the server (never impersonated) when the cache is stale. The
    /// lock is not held during the read: concurrent requests on a stale cache may each read.
    pub async fn get(&self, connection: &Connection) -> Result<AccessRules, ReadError> {
        if let Some((at, rules)) = self.cached.lock().await.as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(rules.clone());
        }
        let client = connection.client(None);
        let config_map =
            read_config_map(&client, &self.namespace, &self.name, self.read_timeout).await?;
        let rules = match config_map {
            None => AccessRules::Absent,
            Some(config_map) => match config_map.data.as_ref().and_then(|d| d.get(ACCESS_KEY)) {
                None => AccessRules::Absent,
                Some(text) => {
                    let rules = AccessRules::parse(text);
                    if rules == AccessRules::Malformed {
                        warn!(
                            configmap = %self.name,
                            namespace = %self.namespace,
                            key = ACCESS_KEY,
                            "access rules are malformed: every non-admin is denied until they are fixed"
                        );
                    }
                    rules
                }
            },
        };
        *self.cached.lock().await = Some((Instant::now(), rules.clone()));
        Ok(rules)
    }
}
