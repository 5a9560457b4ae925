//! The hub's own methods (`hubwire.status`, `hubwire.methods`) are
//! described in its HELLO like any provider's: a doc and the JSON Schemas
//! of `own_schemas.rs` (`docs/hub.md`, "The hub's own methods").

mod common;

use common::Hub;
use hubwire_hub::own_schemas;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hubs_own_methods_carry_schemas_and_docs_in_its_hello() {
    let hub = Hub::start("");
    let c = hub.connect().await;
    let method = |name: &str| c.peer().methods.iter().find(|m| m.name == name).cloned().unwrap_or_else(|| panic!("{name} missing"));
    let status = method("hubwire.status");
    assert_eq!(status.input, own_schemas::no_input());
    assert_eq!(status.output, own_schemas::status_output());
    assert!(status.doc.is_some_and(|d| !d.is_empty()));
    let methods = method("hubwire.methods");
    assert_eq!(methods.input, own_schemas::no_input());
    assert_eq!(methods.output, own_schemas::methods_output());
    assert!(methods.doc.is_some_and(|d| !d.is_empty()));
}
