//! Impersonation: `Impersonate-User`, `-Group`, `-Uid` and `-Extra-*`, each authorized with the
//! `impersonate` verb for the requester (the real server's legacy `WithImpersonation` filter).

use http::HeaderMap;

use crate::observe::RequestLogEntry;
use crate::state::Shared;
use rollsafe_emulator_registry::authorizer::{self, Attributes};
use rollsafe_emulator_registry::identity::{self, UserInfo};
use rollsafe_emulator_types::status::StatusError;

/// The impersonation headers of a request, read strictly: a value that is not UTF-8, or a
/// header the real server would read only once given twice, is refused instead of skipped (a
/// skipped header would run the request as the impersonator).
#[derive(Debug, Default)]
struct ImpersonationHeaders {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extras: Vec<(String, String)>,
}

fn invalid_impersonation(header: &str, why: &str) -> StatusError {
    StatusError::bad_request(&format!("invalid impersonation header {header}: {why}"))
}

fn header_utf8<'h>(name: &str, value: &'h http::HeaderValue) -> Result<&'h str, StatusError> {
    std::str::from_utf8(value.as_bytes())
        .map_err(|_| invalid_impersonation(name, "the value is not valid UTF-8"))
}

/// One value of a single-valued header; `None` when absent or empty (the real filter treats an
/// empty value as not impersonating).
fn single_header(headers: &HeaderMap, name: &str) -> Result<Option<String>, StatusError> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid_impersonation(name, "it may be given once"));
    }
    let text = header_utf8(name, first)?;
    Ok((!text.is_empty()).then(|| text.to_string()))
}

impl ImpersonationHeaders {
    fn read(headers: &HeaderMap) -> Result<Self, StatusError> {
        let user = single_header(headers, "impersonate-user")?;
        let uid = single_header(headers, "impersonate-uid")?;
        let groups = headers
            .get_all("impersonate-group")
            .iter()
            .map(|v| header_utf8("Impersonate-Group", v).map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let mut extras = Vec::new();
        for (name, value) in headers {
            let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
                continue;
            };
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8()
                .map_err(|_| invalid_impersonation(name.as_str(), "the key is not valid UTF-8"))?
                .into_owned();
            extras.push((key, header_utf8(name.as_str(), value)?.to_string()));
        }
        Ok(Self {
            user,
            groups,
            uid,
            extras,
        })
    }
}

pub(crate) fn impersonate(
    headers: &HeaderMap,
    shared: &Shared,
    requester: UserInfo,
    entry: &mut RequestLogEntry,
) -> Result<UserInfo, StatusError> {
    let ImpersonationHeaders {
        user,
        groups,
        uid,
        extras,
    } = ImpersonationHeaders::read(headers)?;
    entry.impersonated_user = user.clone();
    entry.impersonated_groups = groups.clone();
    entry.impersonated_uid = uid.clone();
    let Some(user) = user else {
        if let Some(g) = groups.first() {
            return Err(StatusError::bad_request(&format!(
                "requested [{{Group  {g}  impersonate  groups}}] without impersonating a user"
            )));
        }
        if uid.is_some() || !extras.is_empty() {
            return Err(StatusError::bad_request(
                "requested [{UID / Extra  impersonate}] without impersonating a user",
            ));
        }
        return Ok(requester);
    };
    let store = shared.store();
    let check = |attrs: Attributes| authorizer::check(&store, &requester, &attrs);
    let impersonate = |group: &str, resource: &str, ns: &str, name: &str, sub: &str| Attributes {
        verb: "impersonate".into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: None,
    };
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, name)| (ns.to_string(), name.to_string()));
    match &service_account {
        Some((ns, name)) => check(impersonate("", "serviceaccounts", ns, name, ""))?,
        None => check(impersonate("", "users", "", &user, ""))?,
    }
    for g in &groups {
        check(impersonate("", "groups", "", g, ""))?;
    }
    if let Some(uid) = &uid {
        check(impersonate("authentication.k8s.io", "uids", "", uid, ""))?;
    }
    for (key, value) in &extras {
        check(impersonate(
            "authentication.k8s.io",
            "userextras",
            "",
            value,
            key,
        ))?;
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = &service_account
        && all_groups.is_empty()
    {
        all_groups.push("system:serviceaccounts".into());
        all_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    let implicit = if user == identity::ANONYMOUS_USER {
        identity::UNAUTHENTICATED_GROUP
    } else {
        identity::AUTHENTICATED_GROUP
    };
    if !all_groups.iter().any(|g| g == implicit) {
        all_groups.push(implicit.into());
    }
    Ok(UserInfo {
        name: user,
        groups: all_groups,
        uid,
    })
}
