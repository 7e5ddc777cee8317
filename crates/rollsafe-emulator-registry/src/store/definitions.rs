//! What stored CustomResourceDefinitions make servable: each served version of a CRD is a
//! resource (`resources::custom`), the storage version holding the objects and the others
//! showing them with their own `apiVersion` (conversion `None`, the real default). Storing a
//! CRD serves its kinds at once; removing it removes every object of them, then stops serving
//! them, as the CRD finalizer's cleanup does.

use std::sync::Arc;

use serde_json::Value;

use super::{Key, Store, meta_str};
use crate::strategy::crd;
use rollsafe_emulator_types::resources::{ResId, custom, ids};

impl Store {
    /// Whether this store serves `res`: every built-in resource, and the custom resources of
    /// its CRDs.
    pub fn serves(&self, res: ResId) -> bool {
        !custom::is_custom(res) || self.definitions.values().any(|ids| ids.contains(&res))
    }

    /// The `openAPIV3Schema` of the CRD version that serves custom resource `res`; `None` for a
    /// built-in resource or a version without a schema.
    pub fn crd_schema(&self, res: ResId) -> Option<Value> {
        let (crd_name, _) = self
            .definitions
            .iter()
            .find(|(_, ids)| ids.contains(&res))?;
        let crd_object = self.get(ids::CUSTOMRESOURCEDEFINITIONS, "", crd_name)?;
        let version = rollsafe_emulator_types::resources::def(res).version;
        crd_object
            .pointer("/spec/versions")?
            .as_array()?
            .iter()
            .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
            .pointer("/schema/openAPIV3Schema")
            .cloned()
    }

    /// After a CRD is stored: serve the kinds it defines now.
    pub fn serve_definitions(&mut self, crd_object: &Arc<Value>) {
        let name = meta_str(crd_object, "name").unwrap_or("").to_owned();
        let mut served = Vec::new();
        let mut storage = None;
        for mut definition in crd::definitions(crd_object) {
            definition.stored = storage;
            let id = custom::define(&definition);
            storage.get_or_insert(id);
            served.push(id);
        }
        let before = self.definitions.insert(name, served.clone());
        // A version no longer served, or a scope change: objects of the old resources go.
        for old in before.unwrap_or_default() {
            if !served.contains(&old) && !self.definitions.values().any(|ids| ids.contains(&old)) {
                self.remove_all_of(old);
            }
        }
    }

    /// After a CRD is removed: its objects go, then its kinds are no longer served.
    pub fn withdraw_definitions(&mut self, crd_name: &str) {
        for res in self.definitions.remove(crd_name).unwrap_or_default() {
            self.remove_all_of(res);
        }
    }

    fn remove_all_of(&mut self, res: ResId) {
        let keys: Vec<Key> = self
            .objects
            .keys()
            .filter(|(r, _, _)| *r == res)
            .cloned()
            .collect();
        for key in keys {
            self.remove_key(&key);
        }
    }

    /// Whether `res` is the CRD resource.
    pub fn is_definition(res: ResId) -> bool {
        res == ids::CUSTOMRESOURCEDEFINITIONS
    }
}
