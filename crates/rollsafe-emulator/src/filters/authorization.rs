//! The authorization filter (the real server's `WithAuthorization`): a resource request goes on
//! when the RBAC authorizer (`rollsafe_emulator_registry::authorizer`) allows it; otherwise it
//! is answered with the real server's 403.

use rollsafe_emulator_registry::authorizer;
use rollsafe_emulator_registry::identity::UserInfo;
use rollsafe_emulator_types::route::ResourceRequest;
use rollsafe_emulator_types::status::StatusError;

use crate::state::Shared;

/// `Ok` when RBAC allows `user` the request `info` addresses, else the 403 to answer.
pub(crate) fn authorize(
    shared: &Shared,
    user: &UserInfo,
    info: &ResourceRequest,
) -> Result<(), StatusError> {
    let attrs = authorizer::resource_attributes(info);
    authorizer::check(&shared.store(), user, &attrs)
}
