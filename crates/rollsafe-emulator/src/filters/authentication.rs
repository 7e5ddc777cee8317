//! Authentication: a bearer token names a known identity; no credentials is
//! `system:anonymous`; anything else is the real 401.

use http::HeaderMap;
use http::header::AUTHORIZATION;

use crate::state::Shared;
use rollsafe_emulator_registry::identity::UserInfo;
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn authenticate(headers: &HeaderMap, shared: &Shared) -> Result<UserInfo, StatusError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(UserInfo::anonymous());
    };
    let text = value.to_str().map_err(|_| StatusError::unauthorized())?;
    let token = match text.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => return Err(StatusError::unauthorized()),
    };
    if token.is_empty() {
        return Err(StatusError::unauthorized());
    }
    // A bound token for another audience cannot call the API.
    shared
        .identity_for_token(token)
        .filter(|i| !i.audiences_within(&[]).is_empty())
        .map(|i| UserInfo::authenticated(&i.name, &i.groups))
        .ok_or_else(StatusError::unauthorized)
}
