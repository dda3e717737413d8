//! The root package's build script. It does nothing unless `TICKWIRE_LINK_ORDER` names a file:
//! then the `tickwire` binary is linked with LLD in that file's function order (one linker symbol
//! name a line), the order `scripts/build-lean` measures under callgrind, so that every function
//! the lean profile runs sits at the front of `.text`. The kernel maps code in 64 KiB windows
//! around each page fault; with the functions that run spread over the whole binary, nearly all
//! of its text ends up resident, and with them packed together only that block does.
//!
//! With `TICKWIRE_LINK_RELR=1` as well, the relative relocations are packed (`-z
//! pack-relative-relocs`, DT_RELR): the dynamic loader reads every relocation at start, and the
//! binary's 350 KiB of them in the usual form stay mapped; packed they take a few KiB. The
//! binary then needs glibc 2.36 or later to start, which is why it is a choice of its own.
//!
//! The same link sends `log2` to `__wrap_log2` in src/main.rs (`-Wl,--wrap=log2`), so that the
//! binary does not load libm for that one function.
//!
//! Only link arguments change, never the compiler's: the symbol names, which the order file
//! lists, stay those of the build it was made from (RUSTFLAGS could change them through cargo's
//! metadata hash). A symbol the binary no longer has is skipped without a warning, so a stale
//! order file costs memory, never a failed build.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=TICKWIRE_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=TICKWIRE_LINK_RELR");
    let Some(order) = env::var_os("TICKWIRE_LINK_ORDER").filter(|value| !value.is_empty()) else {
        return;
    };
    let order = PathBuf::from(order);
    if !order.is_file() {
        // A missing file is a typo; linking without the order would hide it behind a binary
        // that is merely larger, so the build stops here.
        eprintln!(
            "TICKWIRE_LINK_ORDER names {}, which is not a file",
            order.display()
        );
        std::process::exit(1);
    }
    println!("cargo:rerun-if-changed={}", order.display());

    // The symbol ordering file is an LLD option: use the LLD the toolchain ships (rustc's own
    // choice on x86_64 Linux since 1.90, named here so that an older toolchain or another
    // default linker does the same).
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    let target = env::var("TARGET").unwrap_or_default();
    if let Some(sysroot) = sysroot {
        let gcc_ld = PathBuf::from(sysroot)
            .join("lib/rustlib")
            .join(&target)
            .join("bin/gcc-ld");
        if gcc_ld.join("ld.lld").exists() {
            println!("cargo:rustc-link-arg-bins=-fuse-ld=lld");
            println!("cargo:rustc-link-arg-bins=-B{}", gcc_ld.display());
        } else {
            println!(
                "cargo:warning=no ld.lld in {}: the system's ld.lld must be on PATH",
                gcc_ld.display()
            );
            println!("cargo:rustc-link-arg-bins=-fuse-ld=lld");
        }
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    // libm is loaded for one function, `log2` (hdrhistogram's, when a histogram is made), and
    // keeps some 480 KiB of its pages resident: calls to it go to `__wrap_log2` (src/main.rs,
    // the `libm` crate's port of musl's), and `--as-needed` then leaves libm out.
    println!("cargo:rustc-link-arg-bins=-Wl,--wrap=log2");
    if env::var("TICKWIRE_LINK_RELR").is_ok_and(|value| value == "1") {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
