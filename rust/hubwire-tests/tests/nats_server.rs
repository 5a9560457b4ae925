//! The test helper that runs real `nats-server`s: one server accepts
//! clients; a 3-node cluster has every route up; a killed node stops.

use hubwire_tests::nats_server::{info_line, NatsCluster, NatsServer, ServerOptions};

#[test]
fn one_server_accepts_and_announces_its_max_payload() {
    let server = NatsServer::start_with(&ServerOptions { max_payload: Some(4096) });
    let info = info_line(server.addr()).expect("INFO line");
    assert!(info.contains("\"max_payload\":4096"), "{info}");
    assert!(server.url().starts_with("nats://127.0.0.1:"));
}

#[test]
fn a_cluster_of_three_routes_every_node_and_survives_a_kill() {
    let mut cluster = NatsCluster::start(3);
    for node in &cluster.nodes {
        assert_eq!(node.routes(), 2, "node {} routes", node.port);
    }
    assert_eq!(cluster.urls().split(',').count(), 3);
    cluster.nodes[0].kill();
    assert!(!cluster.nodes[0].is_running());
    assert!(info_line(cluster.nodes[1].addr()).is_some(), "the other nodes still serve");
}
