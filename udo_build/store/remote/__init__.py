"""The remote tier of the store: shared action results in a remote cache, above the local store
(the local store never imports it; `Store.attach_remote` plugs a `tier.Remote` in).

    tier        the remote tier itself: fetch (entry, verify, download) and publish
    entries     the action-cache entry in plain Python; reapi: the REAPI messages the gRPC
                transport writes and reads by their wire format (and as protobuf classes)
    trust       ed25519 signatures of entries and the keys a reader trusts
    transport   the interface every transport implements, its options, errors and `Breaker`
    connect     the transport for a URL, by its scheme
    httpcache   the Bazel HTTP cache protocol (httpclient: its http.client connections)
    grpccache   REAPI caches over gRPC
    s3cache     S3-compatible buckets (s3config: their credentials, region and endpoint)
    deadlines   the watchdog that drops a transfer that stalls or trickles
    pools       the thread pools of the downloads
"""
