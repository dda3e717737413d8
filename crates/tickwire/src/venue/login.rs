//! A venue login's secret material, made by the venue's protocol at start and used by the
//! control plane for the first request of every connection.

/// A venue login: the key id and the private key (PEM). Never printed.
#[derive(Clone)]
pub struct Login {
    pub key_id: String,
    pub private_key_pem: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}
