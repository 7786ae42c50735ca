//! The server against well-behaved and hostile clients, on loopback, no root.
//! Each hostile test runs a server on a thread of its own name and checks,
//! while the attack goes on, that a well-behaved `GET /metrics` is answered
//! within [`GOOD_BOUND`] and that no thread carries that name but the
//! server's (a thread a server spawned would inherit it: Linux copies a
//! thread's name to the threads it creates).

use super::*;
use std::net::TcpStream;
use std::sync::atomic::AtomicUsize;
use std::thread;

/// What a scrape may take while an attack goes on. Loopback answers in well
/// under a millisecond; the margin covers two busy shared cores and one SYN
/// retransmission (1 s) when a burst fills the listen backlog.
const GOOD_BOUND: Duration = Duration::from_millis(2500);
const BODY: &str = "# HELP t_info test\n# TYPE t_info gauge\nt_info 1\n";

/// The health of an agent whose passes go on (ten-minute periods).
fn live() -> Arc<Health> {
    Arc::new(Health::new(Duration::from_secs(600), None))
}

fn test_limits() -> Limits {
    Limits {
        max_connections: 32,
        max_waiting: 32,
        max_head_bytes: 8 * 1024,
        read_deadline: Duration::from_secs(2),
        write_deadline: Duration::from_secs(2),
        poll_interval: Duration::from_millis(100),
    }
}

struct Running {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Result<(), Error>>>,
    name: &'static str,
    published: Arc<Published>,
}

impl Running {
    /// Threads of this process named like the server's thread.
    fn threads(&self) -> usize {
        threads_named(self.name)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap().unwrap();
        }
    }
}

/// A server on 127.0.0.1:<any> running on a thread called `name` (at most 15
/// bytes: the kernel's limit for a thread name).
fn start(name: &'static str, limits: Limits) -> Running {
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
    let addr = server.local_addr();
    let published = Arc::new(Published::new(BODY.to_string()));
    let handler = routes(published.clone(), live());
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = thread::Builder::new()
        .name(name.into())
        .spawn(move || server.run(&flag, handler))
        .unwrap();
    // A thread names itself once it runs (std calls pthread_setname_np from
    // the new thread): wait for that, so a count of 0 cannot pass for 1.
    wait_for_thread(name);
    Running {
        addr,
        stop,
        thread: Some(thread),
        name,
        published,
    }
}

fn wait_for_thread(name: &str) {
    let t = Instant::now();
    while threads_named(name) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "no thread named {name}"
        );
        thread::sleep(Duration::from_millis(5));
    }
}

fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == name)
        .count()
}

struct Reply {
    status: u16,
    head: String,
    body: Vec<u8>,
}

/// Send `request` as is and read the whole reply (the server closes).
fn exchange(addr: SocketAddr, request: &[u8]) -> io::Result<Reply> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(request)?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other(format!("no head in {} bytes", all.len())))?;
    let head = String::from_utf8(all[..split].to_vec()).map_err(io::Error::other)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(head.clone()))?;
    Ok(Reply {
        status,
        head,
        body: all[split + 4..].to_vec(),
    })
}

fn get(addr: SocketAddr, path: &str) -> Reply {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n");
    exchange(addr, req.as_bytes()).unwrap()
}

/// A well-behaved scrape: 200, the published body, within GOOD_BOUND.
fn good_scrape(addr: SocketAddr, during: &str) -> Duration {
    let t = Instant::now();
    let r = get(addr, "/metrics");
    let took = t.elapsed();
    assert_eq!(r.status, 200, "{during}: {}", r.head);
    assert_eq!(r.body, BODY.as_bytes(), "{during}");
    assert!(took < GOOD_BOUND, "{during}: a scrape took {took:?}");
    took
}

/// Scrape every 50 ms until `done`, from another thread; how many succeeded
/// (each within GOOD_BOUND, or the thread panics). Prints the slowest.
fn scrape_while(
    addr: SocketAddr,
    done: Arc<AtomicBool>,
    during: &'static str,
) -> thread::JoinHandle<usize> {
    thread::spawn(move || {
        let (mut n, mut slowest) = (0, Duration::ZERO);
        while !done.load(Ordering::Relaxed) {
            slowest = slowest.max(good_scrape(addr, during));
            n += 1;
            thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{during}: {n} scrapes, the slowest {slowest:?}");
        n
    })
}

#[test]
fn serves_metrics_and_healthz_then_closes() {
    let srv = start("http-basic", test_limits());
    let r = get(srv.addr, "/metrics");
    assert_eq!(r.status, 200);
    let h = r.head.to_ascii_lowercase();
    assert!(
        h.contains("\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8"),
        "{h}"
    );
    assert!(
        h.contains(&format!("\r\ncontent-length: {}", BODY.len())),
        "{h}"
    );
    assert!(h.contains("\r\nconnection: close"), "{h}");
    assert_eq!(r.body, BODY.as_bytes());

    // A query string does not change the path; HTTP/1.0 and bare LF lines too.
    assert_eq!(get(srv.addr, "/metrics?collect[]=x").status, 200);
    let r = exchange(srv.addr, b"GET /metrics HTTP/1.0\n\n").unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, BODY.as_bytes()));

    let r = exchange(srv.addr, b"HEAD /metrics HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert!(r.head.contains(&format!("Content-Length: {}", BODY.len())));

    let r = get(srv.addr, "/healthz");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));

    srv.published.publish("t_info 2\n".into());
    assert_eq!(get(srv.addr, "/metrics").body, b"t_info 2\n");
    assert_eq!(srv.threads(), 1);
}

/// `/healthz` is the agent's health, not the server's: 503, saying why, when
/// the passes stopped or the NRI plugin's thread ended (`health.rs` judges).
#[test]
fn healthz_is_503_naming_what_stopped() {
    use std::sync::atomic::AtomicBool;
    let ask = |health: Health| {
        let server = Server::bind("127.0.0.1:0".parse().unwrap(), test_limits()).unwrap();
        let addr = server.local_addr();
        let handle = server
            .spawn(routes(
                Arc::new(Published::new(BODY.into())),
                Arc::new(health),
            ))
            .unwrap();
        let r = get(addr, "/healthz");
        handle.shutdown().unwrap();
        (r.status, String::from_utf8(r.body).unwrap())
    };
    // No period at all: stale as soon as any time has passed.
    let (status, body) = ask(Health::new(Duration::ZERO, None));
    assert_eq!(status, 503, "{body}");
    assert!(
        body.starts_with("stale: no repair pass has ended"),
        "{body}"
    );
    let (status, body) = ask(Health::new(
        Duration::from_secs(600),
        Some(Arc::new(AtomicBool::new(true))),
    ));
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("NRI plugin's thread is not running"),
        "{body}"
    );
    let (status, body) = ask(Health::new(
        Duration::from_secs(600),
        Some(Arc::new(AtomicBool::new(false))),
    ));
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}

#[test]
fn refuses_other_methods_paths_and_malformed_heads() {
    let srv = start("http-refuse", test_limits());
    for m in [
        "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT", "get",
    ] {
        let r = exchange(
            srv.addr,
            format!("{m} /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        )
        .unwrap();
        assert_eq!(r.status, 405, "{m}");
        assert!(r.head.contains("\r\nAllow: GET, HEAD"), "{m}: {}", r.head);
    }
    // Path traversal and look-alikes: nothing is a file here, and only the
    // two exact paths exist.
    for p in [
        "/",
        "/metrics/",
        "//metrics",
        "/metrics/../healthz",
        "/../../etc/passwd",
        "/%2e%2e/metrics",
        "/metrics%00",
        "/Metrics",
        "/healthz/../metrics",
    ] {
        assert_eq!(get(srv.addr, p).status, 404, "{p}");
    }
    for req in [
        &b"GET /metrics\r\n\r\n"[..],
        b"GET /metrics HTTP/2.0\r\n\r\n",
        b"GET /metrics HTTP/1.1 extra\r\n\r\n",
        b"GET metrics HTTP/1.1\r\n\r\n",
        b"GET http://evil/metrics HTTP/1.1\r\n\r\n",
        b"GET /met rics HTTP/1.1\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nBad Name: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nX: a\x01b\r\n\r\n",
        b"G\xffT /metrics HTTP/1.1\r\n\r\n",
        b"\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
    ] {
        let r = exchange(srv.addr, req).unwrap();
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(req));
    }
    assert_eq!(srv.threads(), 1);
}

#[test]
fn a_client_sending_one_byte_a_second_is_cut_off() {
    let limits = test_limits();
    let srv = start("http-slowloris", limits);
    let done = Arc::new(AtomicBool::new(false));
    let scraper = scrape_while(srv.addr, done.clone(), "slowloris");
    let slow = {
        let addr = srv.addr;
        thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            let t = Instant::now();
            for b in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                if s.write_all(&[*b]).is_err() {
                    break;
                }
                // The server closed (EOF) or answered 408.
                let mut buf = [0u8; 128];
                match s.read(&mut buf) {
                    Ok(_) => break,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
                assert!(t.elapsed() < Duration::from_secs(10), "never cut off");
                thread::sleep(Duration::from_secs(1));
            }
            t.elapsed()
        })
    };
    let cut = slow.join().unwrap();
    done.store(true, Ordering::Relaxed);
    let scrapes = scraper.join().unwrap();
    assert!(
        cut >= limits.read_deadline - Duration::from_millis(100)
            && cut <= limits.read_deadline + Duration::from_millis(1500),
        "cut off after {cut:?}, deadline {:?}",
        limits.read_deadline
    );
    assert!(scrapes >= 5, "only {scrapes} scrapes during the attack");
    assert_eq!(srv.threads(), 1);
}

#[test]
fn a_one_megabyte_header_gets_431_and_nothing_else_waits() {
    let srv = start("http-bighead", test_limits());
    let done = Arc::new(AtomicBool::new(false));
    let scraper = scrape_while(srv.addr, done.clone(), "1 MB header");
    for _ in 0..3 {
        let mut req = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
        req.resize(req.len() + (1 << 20), b'a');
        req.extend_from_slice(b"\r\n\r\n");
        let r = exchange(srv.addr, &req).unwrap();
        assert_eq!(r.status, 431, "{}", r.head);
    }
    // A head just under the cap is still served.
    let mut req = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    req.resize(8 * 1024 - 4, b'b');
    req.extend_from_slice(b"\r\n\r\n");
    assert_eq!(exchange(srv.addr, &req).unwrap().status, 200);
    thread::sleep(Duration::from_millis(200));
    done.store(true, Ordering::Relaxed);
    assert!(scraper.join().unwrap() >= 1);
    assert_eq!(srv.threads(), 1);
}

#[test]
fn five_hundred_connections_at_once_leave_room_for_a_scrape() {
    let srv = start("http-flood", test_limits());
    let done = Arc::new(AtomicBool::new(false));
    let scraper = scrape_while(srv.addr, done.clone(), "500 connections");
    let opened = Arc::new(AtomicUsize::new(0));
    // Four threads open 125 idle connections each, as fast as they can, and
    // hold them open.
    let holders: Vec<_> = (0..4)
        .map(|_| {
            let (addr, opened) = (srv.addr, opened.clone());
            thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..125 {
                    if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                        opened.fetch_add(1, Ordering::Relaxed);
                        held.push(s);
                    }
                }
                held
            })
        })
        .collect();
    let held: Vec<Vec<TcpStream>> = holders.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(opened.load(Ordering::Relaxed), 500);
    // All 500 still open on the client side: the server keeps at most 32
    // of those that sent nothing (max_waiting).
    let took = good_scrape(srv.addr, "500 idle connections held open");
    eprintln!("with 500 connections held open: a scrape took {took:?}");
    assert_eq!(srv.threads(), 1, "the server spawned threads");
    // Some of them now send a request: those still held are answered, those
    // evicted see EOF or a reset; none hangs past the read deadline.
    let t = Instant::now();
    let mut answered = 0;
    for mut s in held.into_iter().flatten().take(40) {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n").is_ok() {
            let mut buf = Vec::new();
            if s.read_to_end(&mut buf).is_ok() && buf.starts_with(b"HTTP/1.1 200") {
                answered += 1;
            }
        }
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        answered <= 32,
        "{answered} answered: more than max_waiting were held"
    );
    done.store(true, Ordering::Relaxed);
    assert!(scraper.join().unwrap() >= 1);
    good_scrape(srv.addr, "after the flood");
    assert_eq!(srv.threads(), 1);
}

/// Connection churn evicted a scrape whose request came late: it was the
/// oldest connection waiting for a request, so the first one past the
/// table's size closed it. A client that connects and has not sent yet
/// costs a descriptor and no buffer; hundreds of newer ones must not cost
/// it its request.
#[test]
fn a_request_sent_late_outlives_hundreds_of_newer_idle_connections() {
    let srv = start("http-late", Limits::default());
    let mut late = TcpStream::connect(srv.addr).unwrap();
    late.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    thread::sleep(Duration::from_millis(50));
    let newer: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect_timeout(&srv.addr, Duration::from_secs(5)).unwrap())
        .collect();
    // Time for the server to accept them all (it takes 16 a turn).
    thread::sleep(Duration::from_millis(300));
    late.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut all = Vec::new();
    late.read_to_end(&mut all).unwrap();
    assert!(
        all.starts_with(b"HTTP/1.1 200 ") && all.ends_with(BODY.as_bytes()),
        "the late request: {:?}",
        String::from_utf8_lossy(&all)
    );
    good_scrape(srv.addr, "300 newer idle connections");
    drop(newer);
    assert_eq!(srv.threads(), 1);
}

/// The two bounds count different connections: part of a head costs a
/// buffer (`max_connections` of them, the oldest closed first); a connection
/// that has sent nothing costs none and is not counted there.
#[test]
fn partial_heads_past_max_connections_close_the_oldest_and_idle_ones_do_not_count() {
    let limits = Limits {
        max_connections: 4,
        max_waiting: 64,
        ..test_limits()
    };
    let srv = start("http-classes", limits);
    let connect = || {
        let s = TcpStream::connect_timeout(&srv.addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    };
    let idle: Vec<TcpStream> = (0..20).map(|_| connect()).collect();
    let partial: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = connect();
            s.write_all(b"GET /met").unwrap();
            // One at a time, so the server sees them in this order.
            thread::sleep(Duration::from_millis(30));
            s
        })
        .collect();
    thread::sleep(Duration::from_millis(200));
    let answered = |mut s: TcpStream, rest: &[u8]| {
        let _ = s.write_all(rest);
        let mut all = Vec::new();
        let _ = s.read_to_end(&mut all);
        all.starts_with(b"HTTP/1.1 200 ")
    };
    let served: Vec<bool> = partial
        .into_iter()
        .map(|s| answered(s, b"rics HTTP/1.1\r\n\r\n"))
        .collect();
    assert_eq!(
        served,
        [false, false, false, false, true, true, true, true],
        "the four oldest partial heads closed, the four newest kept"
    );
    for s in idle {
        assert!(
            answered(s, b"GET /healthz HTTP/1.1\r\n\r\n"),
            "an idle connection was closed"
        );
    }
    assert_eq!(srv.threads(), 1);
}

#[test]
fn posts_garbage_and_traversal_in_bulk_do_not_slow_a_scrape() {
    let srv = start("http-garbage", test_limits());
    let done = Arc::new(AtomicBool::new(false));
    let scraper = scrape_while(srv.addr, done.clone(), "garbage");
    // xorshift: the same bytes every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut random = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    };
    let t = Instant::now();
    for i in 0..60 {
        let (req, expect): (Vec<u8>, &[u16]) = match i % 4 {
            0 => (
                b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
                &[405],
            ),
            1 => (
                b"GET /../../../../etc/shadow HTTP/1.1\r\n\r\n".to_vec(),
                &[404],
            ),
            // Random bytes, then an end of head: 400 (or 431 when the bytes
            // held no line break and overflowed the cap, which 2000 cannot).
            2 => {
                let mut r = random(2000);
                r.retain(|b| *b != b'\n');
                r.extend_from_slice(b"\r\n\r\n");
                (r, &[400])
            }
            // Random bytes past the cap with no end of head: 431.
            _ => {
                let mut r = random(9000);
                r.retain(|b| *b != b'\n');
                (r, &[431])
            }
        };
        let r = exchange(srv.addr, &req).unwrap();
        assert!(expect.contains(&r.status), "case {i}: {}", r.head);
    }
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    done.store(true, Ordering::Relaxed);
    assert!(scraper.join().unwrap() >= 1);
    assert_eq!(srv.threads(), 1);
}

#[test]
fn a_client_that_never_reads_is_cut_off_at_the_write_deadline() {
    let limits = test_limits();
    let srv = start("http-noread", limits);
    // 32 MB: far more than the socket buffers hold, so the write blocks.
    srv.published.publish("x".repeat(32 << 20));
    let mut s = TcpStream::connect(srv.addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let t = Instant::now();
    thread::sleep(limits.write_deadline + Duration::from_millis(500));
    // Now read: the server gave up, so the stream ends (or resets) long
    // before 32 MB.
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    assert!(got < 32 << 20, "read {got} bytes: the whole body");
    assert!(t.elapsed() < limits.write_deadline + Duration::from_secs(5));
    srv.published.publish(BODY.into());
    good_scrape(srv.addr, "after a client that never read");
    assert_eq!(srv.threads(), 1);
}

#[test]
fn a_scrape_reads_one_whole_published_body_while_the_loop_publishes() {
    let srv = start("http-publish", test_limits());
    let bodies: Vec<String> = (0..4)
        .map(|i| format!("t_info {i}\n").repeat(20_000))
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let published = Arc::new(AtomicUsize::new(0));
    let publisher = {
        let (p, b, stop, n) = (
            srv.published.clone(),
            bodies.clone(),
            stop.clone(),
            published.clone(),
        );
        thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                p.publish(b[i % b.len()].clone());
                i += 1;
                n.store(i, Ordering::Relaxed);
            }
        })
    };
    // Scrape only once the publisher runs (two busy cores may start it late).
    let t = Instant::now();
    while published.load(Ordering::Relaxed) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the publisher never ran"
        );
        thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..20 {
        let r = get(srv.addr, "/metrics");
        assert_eq!(r.status, 200);
        assert!(
            bodies.iter().any(|b| b.as_bytes() == r.body) || r.body == BODY.as_bytes(),
            "a torn body of {} bytes",
            r.body.len()
        );
    }
    stop.store(true, Ordering::Relaxed);
    publisher.join().unwrap();
    eprintln!(
        "{} bodies published during 20 scrapes",
        published.load(Ordering::Relaxed)
    );
}

#[test]
fn spawn_blocks_termination_signals_in_its_thread_and_stops_within_a_second() {
    use nix::sys::signal::SigSet;
    let before = SigSet::thread_get_mask().unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
    let addr = server.local_addr();
    let handle = server
        .spawn(routes(Arc::new(Published::new(BODY.into())), live()))
        .unwrap();
    assert_eq!(handle.local_addr(), addr);
    // The caller's mask is as it was.
    let after = SigSet::thread_get_mask().unwrap();
    for sig in nix::sys::signal::Signal::iterator() {
        assert_eq!(before.contains(sig), after.contains(sig), "{sig:?}");
    }
    // Every thread named roce-tune-http (this test's, maybe another's) has
    // SIGTERM (15), SIGINT (2) and SIGHUP (1) in its blocked set.
    wait_for_thread("roce-tune-http");
    let mut found = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = t.unwrap().path();
        if std::fs::read_to_string(dir.join("comm"))
            .unwrap_or_default()
            .trim_end()
            != "roce-tune-http"
        {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let blk = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .unwrap();
        let mask = u64::from_str_radix(blk.trim(), 16).unwrap();
        for sig in [1, 2, 15] {
            assert!(
                mask & (1 << (sig - 1)) != 0,
                "signal {sig} not blocked: {blk}"
            );
        }
        found += 1;
    }
    assert!(found >= 1);
    assert_eq!(get(addr, "/metrics").status, 200);
    // A slow client is connected: shutdown does not wait for it.
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.write_all(b"GET /met").unwrap();
    thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    handle.shutdown().unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(TcpStream::connect(addr).is_err(), "still listening");
}

/// The agent's SIGTERM budget is a second: a server thread asleep in its
/// poll is woken by the shutdown, not found at its next poll timeout.
#[test]
fn shutdown_wakes_the_server_thread_whatever_its_poll_interval() {
    let limits = Limits {
        poll_interval: Duration::from_secs(60),
        ..Limits::default()
    };
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), limits).unwrap();
    let addr = server.local_addr();
    let handle = server
        .spawn(routes(Arc::new(Published::new(BODY.into())), live()))
        .unwrap();
    assert_eq!(get(addr, "/metrics").status, 200);
    // Idle now: the thread is in a poll of up to 60 s.
    thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    handle.shutdown().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn bind_and_address_errors_are_typed_and_quote_nothing() {
    let taken = Server::bind("127.0.0.1:0".parse().unwrap(), Limits::default()).unwrap();
    match Server::bind(taken.local_addr(), Limits::default()) {
        Err(Error::Bind { addr, source }) => {
            assert_eq!(addr, taken.local_addr());
            assert_eq!(source.kind(), ErrorKind::AddrInUse);
        }
        other => panic!("{:?}", other.map(|s| s.local_addr())),
    }
    assert_eq!(
        parse_address(DEFAULT_ADDRESS).unwrap(),
        "127.0.0.1:9662".parse().unwrap()
    );
    assert!(parse_address("[::1]:9662").unwrap().is_ipv6());
    for bad in [
        "localhost:9662",
        "127.0.0.1",
        "127.0.0.1:99999",
        "",
        "secret-token:1",
    ] {
        let e = parse_address(bad).unwrap_err();
        assert!(matches!(e, Error::Address { len } if len == bad.len()));
        let msg = e.to_string();
        assert!(
            bad.is_empty() || !msg.contains(bad) || bad == "127.0.0.1",
            "{msg}"
        );
        assert!(!msg.contains("secret"), "{msg}");
    }
}
