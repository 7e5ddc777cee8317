// A certified OpenID Provider (npm's oidc-provider) for rollsafe's login tests.
//
// Environment:
//   OIDC_PROVIDER_MODULE  absolute path of oidc-provider's lib/index.js
//   PORT                  the port to listen on (127.0.0.1)
//   REDIRECT_URIS         JSON list of the client's redirect URIs
//   KEY_ID                the signing key's kid (a new process with another kid is a key rotation)
//   CLOCK_OFFSET_SECONDS  shifts the provider's clock (negative: every token it issues is old)
//   GROUPS                JSON list of the groups every account has
// Prints one JSON line {"issuer": …} once listening.
import { generateKeyPairSync } from 'node:crypto';
import { pathToFileURL } from 'node:url';

const { default: Provider } = await import(pathToFileURL(process.env.OIDC_PROVIDER_MODULE).href);

const offset = Number(process.env.CLOCK_OFFSET_SECONDS || 0);
if (offset) {
  const realNow = Date.now;
  Date.now = () => realNow() + offset * 1000;
}

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: process.env.KEY_ID || 'key-1', use: 'sig', alg: 'RS256' };
const groups = JSON.parse(process.env.GROUPS || '["platform","developers"]');

const provider = new Provider(issuer, {
  // `rollsafe`, and `another-app`: a second client with the same redirect URIs, whose codes and
  // ID tokens are for another audience.
  clients: ['rollsafe', 'another-app'].map((client_id) => ({
    client_id,
    client_secret: 'rollsafe-client-secret',
    redirect_uris: JSON.parse(process.env.REDIRECT_URIS),
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  })),
  jwks: { keys: [jwk] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
  scopes: ['openid', 'email', 'groups'],
  conformIdTokenClaims: false,
  cookies: { keys: ['rollsafe-test-cookie-key'] },
  features: { devInteractions: { enabled: true } },
  findAccount: async (ctx, id) => ({
    accountId: id,
    claims: async () => ({ sub: id, email: `${id}@example.com`, email_verified: true, groups }),
  }),
});

provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});
