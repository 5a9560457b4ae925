//! Throwaway certificates for TLS tests, made fresh in each test run (no
//! key is ever checked in): a CA, a server certificate for `localhost`
//! and `127.0.0.1` signed by it, and a client certificate signed by it.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

/// A certificate (PEM) and its private key (PEM).
pub struct Identity {
    /// The certificate, PEM.
    pub cert: String,
    /// Its private key, PEM (PKCS#8).
    pub key: String,
}

/// A test CA and what it signed.
pub struct TestPki {
    /// The CA certificate, PEM: what clients trust and `client_ca` names.
    pub ca: String,
    /// The server's certificate, valid for `localhost` and `127.0.0.1`.
    pub server: Identity,
    /// A client certificate signed by the same CA.
    pub client: Identity,
}

fn leaf(names: &[&str], common_name: &str, ca: &CertifiedIssuer<'_, KeyPair>) -> Identity {
    let mut params = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, common_name);
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    Identity { cert: cert.pem(), key: key.serialize_pem() }
}

impl TestPki {
    /// A new CA named `name`, with a server and a client certificate.
    pub fn new(name: &str) -> TestPki {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, format!("{name} test CA"));
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestPki {
            ca: ca.pem(),
            server: leaf(&["localhost", "127.0.0.1"], "hubwire test server", &ca),
            client: leaf(&[], "hubwire test client", &ca),
        }
    }

    /// Writes `ca.pem`, `server.pem`, `server.key`, `client.pem` and
    /// `client.key` into `dir` (keys mode 0600) and returns `dir`.
    pub fn write_to(&self, dir: &Path) -> PathBuf {
        use std::os::unix::fs::OpenOptionsExt;
        let files = [
            ("ca.pem", &self.ca),
            ("server.pem", &self.server.cert),
            ("server.key", &self.server.key),
            ("client.pem", &self.client.cert),
            ("client.key", &self.client.key),
        ];
        for (name, text) in files {
            let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(dir.join(name)).unwrap();
            std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
        }
        dir.to_path_buf()
    }
}
