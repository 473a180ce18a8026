//! `./sawmill image SYSTEM --iso -o FILE`: a bootable CD image — GRUB (Debian's grub-pc-bin,
//! packed by `grub-mkrescue`) loading the system image by multiboot2 — so a system boots in
//! other hypervisors and on a PC, not only under QEMU's `-kernel`. For the Linux system the
//! root file system goes beside it as a second image (`FILE` without `.iso`, plus `-root.img`):
//! sawmill reads disks through its virtio-blk driver, not from the CD. Touches: a staging
//! directory next to the output, the output files.

use crate::image;
use crate::repo::Repo;
use std::path::{Path, PathBuf};
use std::process::Command;

/// GRUB's menu: no menu shown, its own messages on the first serial line (the debug console),
/// then the system.
const GRUB_CFG: &str = "set default=0
set timeout_style=hidden
set timeout=0
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
menuentry \"sawmill\" {
  multiboot2 /boot/sawmill.elf
  boot
}
";

/// Writes `output` (an ISO 9660 image GRUB boots) holding `system`'s image; the guest crates
/// must be built.
pub fn write(repo: &Repo, system: &sawmill_manifest::System, output: &Path) -> Result<(), String> {
    let stage = output.with_extension("iso.stage");
    let _ = std::fs::remove_dir_all(&stage);
    let boot = stage.join("boot");
    std::fs::create_dir_all(boot.join("grub")).map_err(|e| format!("{}: {e}", boot.display()))?;
    let r = (|| {
        image::write_image(repo, system, &boot.join("sawmill.elf"))?;
        let cfg = boot.join("grub/grub.cfg");
        std::fs::write(&cfg, GRUB_CFG).map_err(|e| format!("{}: {e}", cfg.display()))?;
        let out = Command::new("grub-mkrescue")
            .arg("-o")
            .arg(output)
            .arg(&stage)
            .output()
            .map_err(|e| {
                format!("grub-mkrescue: {e} (install grub-pc-bin, grub-common, xorriso, mtools)")
            })?;
        if !out.status.success() {
            return Err(format!(
                "grub-mkrescue failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&stage);
    r
}

/// Where the Linux system's root image goes for an ISO at `iso`: `NAME-root.img` beside it.
pub fn root_beside(iso: &Path) -> PathBuf {
    let stem = iso
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "sawmill".into());
    iso.with_file_name(format!("{stem}-root.img"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_image_goes_beside_the_iso() {
        assert_eq!(
            root_beside(Path::new("out/sawmill.iso")),
            PathBuf::from("out/sawmill-root.img")
        );
        assert_eq!(root_beside(Path::new("x")), PathBuf::from("x-root.img"));
    }
}
