//! `starling relay`'s flags and TOML file, as `RelayConfig`s.

use super::*;

#[test]
fn defaults_run_with_no_configuration() {
    let config = build(RelayArgs::default()).unwrap();
    assert_eq!(config.bind, "[::]:4443".parse().unwrap());
    assert!(matches!(config.tls, TlsSource::Generate(ref h) if h == &["localhost"]));
    assert_eq!(config.versions, Protocol::SUPPORTED);
}

/// moq-relay's names for every protocol, lite and IETF, in the order given.
#[test]
fn listen_version_takes_every_protocol_name() {
    let config = build(RelayArgs {
        versions: vec![
            "moq-transport-17".parse().unwrap(),
            "moq-lite-06".parse().unwrap(),
            "moq-transport-14".parse().unwrap(),
        ],
        ..RelayArgs::default()
    })
    .unwrap();
    assert_eq!(
        Protocol::alpns(&config.versions),
        ["moqt-17", "moq-lite-06", "moq-00"]
    );
    assert!("moq-transport-13".parse::<Protocol>().is_err());
}

#[test]
fn a_receive_window_below_the_largest_whole_unit_is_refused_naming_the_setting() {
    let err = build(RelayArgs {
        receive_window: Some(32 << 10),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("--receive-window") && err.contains("control message"),
        "{err}"
    );
    // Frames larger than a window go to their group in pieces, so a window far below
    // the 32 MiB frame bound is fine.
    assert!(build(RelayArgs {
        receive_window: Some(1 << 20),
        ..Default::default()
    })
    .is_ok());
}

#[test]
fn toml_file_is_read_and_flags_override() {
    let dir = std::env::temp_dir().join(format!("starling-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("relay.toml");
    std::fs::write(
        &file,
        "bind = \"127.0.0.1:5000\"\nversions = [\"moq-lite-05\"]\ncache_track_bytes = 1024\ncache_budget = \"512MiB\"\nreceive_budget = \"10%\"\n[tls]\ngenerate = [\"relay.test\"]\n[limits]\nmax_sessions = 100\nmax_handshakes_per_ip = 5\nmax_lag_ms = 750\nmax_fetches = 9\nreceive_window = \"48MiB\"\n",
    )
    .unwrap();
    let config = build(RelayArgs {
        config: Some(file.clone()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(config.bind, "127.0.0.1:5000".parse().unwrap());
    assert_eq!(
        config.versions,
        vec![Protocol::Lite(starling_proto::Version::Lite05)]
    );
    assert_eq!(config.model_limits.track_cache_bytes, 1024);
    assert_eq!(config.cache_budget, MemoryShare::Bytes(512 << 20));
    assert_eq!(config.receive_budget, MemoryShare::Percent(10.0));
    assert_eq!(config.admission.max_sessions, 100);
    assert_eq!(config.admission.handshakes_per_second_per_source, 5);
    assert!(config.admission.exempt_loopback);
    assert_eq!(
        config.admission.max_lag,
        Some(std::time::Duration::from_millis(750))
    );
    assert_eq!(config.http_api.max_fetches, 9);
    assert_eq!(config.receive_windows.connection, 48 << 20);
    assert!(matches!(config.tls, TlsSource::Generate(ref h) if h == &["relay.test"]));
    let config = build(RelayArgs {
        config: Some(file),
        bind: Some("127.0.0.1:6000".parse().unwrap()),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(config.bind, "127.0.0.1:6000".parse().unwrap());
}

#[test]
fn auth_flags_build_public_grants_and_refuse_literals() {
    let config = build(RelayArgs::default()).unwrap();
    assert!(!config.auth.is_enabled());
    let config = build(RelayArgs {
        auth_public: vec!["anon/**".into()],
        auth_public_subscribe: vec!["demo/*".into()],
        ..Default::default()
    })
    .unwrap();
    assert_eq!(config.auth.public_publish.len(), 1);
    assert_eq!(config.auth.public_subscribe.len(), 2);
    assert!(build(RelayArgs {
        auth_public: vec!["anon".into()],
        ..Default::default()
    })
    .is_err());
}

#[test]
fn auth_url_max_age_and_node() {
    let config = build(RelayArgs {
        auth_url: Some("http://127.0.0.1:4440/".parse().unwrap()),
        auth_max_age: Some("250ms".into()),
        auth_node: Some("edge-1".into()),
        ..Default::default()
    })
    .unwrap();
    assert!(config.auth.is_enabled());
    assert_eq!(config.auth.max_age, std::time::Duration::from_millis(250));
    assert_eq!(config.auth.node, "edge-1");
    assert_eq!(parse_duration("1.5s").unwrap().as_millis(), 1500);
    assert_eq!(parse_duration("2").unwrap().as_secs(), 2);
    assert!(parse_duration("soon").is_err());
    // The server decides everything: local rules beside it are refused, as is a plain
    // http:// server off loopback and a zero max age.
    for args in [
        RelayArgs {
            auth_url: Some("http://127.0.0.1:4440/".parse().unwrap()),
            auth_public: vec!["anon/**".into()],
            ..Default::default()
        },
        RelayArgs {
            auth_url: Some("http://auth.example/".parse().unwrap()),
            ..Default::default()
        },
        RelayArgs {
            auth_public: vec!["anon/**".into()],
            auth_max_age: Some("0s".into()),
            ..Default::default()
        },
    ] {
        assert!(build(args).is_err());
    }
}

#[test]
fn cluster_flags_build_peers_and_refuse_removed_keys() {
    let config = build(RelayArgs {
        cluster: ClusterArgs {
            cluster_id: Some(1001),
            cluster_connect: vec![
                "moqt://127.0.0.1:14443/?cost=3".into(),
                "http://127.0.0.1:14444/".into(),
            ],
            connect_tls_insecure: true,
            cluster_peer_idle_timeout: Some("1500ms".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let cluster = &config.cluster;
    assert_eq!(cluster.id, Some(1001));
    assert_eq!(cluster.connect.len(), 2);
    assert_eq!(cluster.connect[1].cost, Some(3));
    assert_eq!(cluster.connect[1].key, "moqt://127.0.0.1:14443");
    assert_eq!(cluster.connect_tls, TlsVerify::Disabled);
    assert_eq!(cluster.peer_idle_timeout.as_millis(), 1500);
    for cluster in [
        ClusterArgs {
            cluster_connect: vec!["relay.example:4443".into()],
            ..Default::default()
        },
        ClusterArgs {
            cluster_id: Some(0),
            ..Default::default()
        },
        ClusterArgs {
            cluster_mesh: Some("true".into()),
            ..Default::default()
        },
        ClusterArgs {
            cluster_linger: Some("5s".into()),
            ..Default::default()
        },
    ] {
        let err = build(RelayArgs {
            cluster,
            ..Default::default()
        });
        assert!(err.is_err());
    }
    let err = build(RelayArgs {
        cluster: ClusterArgs {
            cluster_mesh: Some("true".into()),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap_err();
    assert!(format!("{err:#}").contains("--cluster-connect"), "{err:#}");
}

#[test]
fn cluster_and_connect_tables_load() {
    let dir = std::env::temp_dir().join(format!("starling-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token = dir.join("cluster.jwt");
    std::fs::write(&token, "TOKEN\n").unwrap();
    let toml = dir.join("relay.toml");
    std::fs::write(
        &toml,
        format!(
            "[cluster]\nid = 7\nmax_hops = 4\ntoken = {:?}\nconnect = [\"moqt://a:1/\", \
             {{ url = \"moqt://b:1/\", cost = 2 }}]\n[connect.tls]\nfingerprint = {:?}\n",
            token.display().to_string(),
            "ab".repeat(32)
        ),
    )
    .unwrap();
    let config = build(RelayArgs {
        config: Some(toml.clone()),
        ..Default::default()
    })
    .unwrap();
    let cluster = &config.cluster;
    assert_eq!((cluster.id, cluster.max_hops), (Some(7), 4));
    assert_eq!(cluster.token.as_deref(), Some("TOKEN"));
    assert_eq!(cluster.connect.len(), 2);
    assert_eq!(cluster.connect[1].cost, Some(2));
    assert!(matches!(cluster.connect_tls, TlsVerify::PinnedSha256(ref pins) if pins.len() == 1));
    assert_eq!(cluster.dials()[0].url.as_str(), "moqt://a:1/?jwt=TOKEN");
    std::fs::write(&toml, "[cluster]\nmesh = true\n").unwrap();
    assert!(build(RelayArgs {
        config: Some(toml),
        ..Default::default()
    })
    .is_err());
}

#[test]
fn auth_key_file_and_toml_table_load() {
    let dir = std::env::temp_dir().join(format!("starling-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = starling_auth::Key::generate(starling_auth::Algorithm::HS256).unwrap();
    let file = dir.join("relay.jwk");
    key.write_file(&file).unwrap();
    let config = build(RelayArgs {
        auth_key: Some(file.clone()),
        ..Default::default()
    })
    .unwrap();
    assert!(matches!(config.auth.keys, Some(KeySource::File(_))));
    let toml = dir.join("auth.toml");
    std::fs::write(
        &toml,
        format!(
            "[auth]\nkey = {:?}\npublic_subscribe = [\"demo/**\"]\n",
            file.display().to_string()
        ),
    )
    .unwrap();
    let config = build(RelayArgs {
        config: Some(toml),
        ..Default::default()
    })
    .unwrap();
    assert!(config.auth.keys.is_some());
    assert_eq!(config.auth.public_subscribe.len(), 1);
    assert!(config.auth.public_publish.is_empty());

    // A directory of `{kid}.jwk` files.
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    for _ in 0..2 {
        let key = starling_auth::Key::generate(starling_auth::Algorithm::HS256).unwrap();
        key.write_file(keys.join(format!("{}.jwk", key.kid().unwrap())))
            .unwrap();
    }
    let config = build(RelayArgs {
        auth_key_dir: Some(keys.clone()),
        ..Default::default()
    })
    .unwrap();
    assert!(matches!(config.auth.keys, Some(KeySource::Dir(_))));
    assert!(build(RelayArgs {
        auth_key_dir: Some(keys),
        auth_key: Some(file),
        ..Default::default()
    })
    .is_err());
}
