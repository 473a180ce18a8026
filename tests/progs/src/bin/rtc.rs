//! Scenarios 5 and 6: a user-level driver for the CMOS real-time clock's periodic interrupt
//! (I/O ports 0x70-0x71, IRQ 8), delivered through a notification.
//!
//! With argument `irq`: counts 32 interrupts. With argument `sched`: also runs spinning threads
//! of lower priority (one alone, then two of equal priority) and checks that the high-priority
//! driver thread still gets every interrupt and that the equal spinners both progress.
#![no_std]
#![no_main]
use core::sync::atomic::{AtomicU64, Ordering};
use sawmill_rt::{env, println, slots, sys, thread};
use sawmill_testprogs::check;

sawmill_rt::entry!(main);

fn outb(port: u16, v: u8) {
    // SAFETY: root delegated ports 0x70-0x71 to this task.
    unsafe { core::arch::asm!("out dx, al", in("dx") port, in("al") v) }
}
fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: as above.
    unsafe { core::arch::asm!("in al, dx", in("dx") port, out("al") v) }
    v
}
fn cmos_read(r: u8) -> u8 {
    outb(0x70, r | 0x80);
    inb(0x71)
}
fn cmos_write(r: u8, v: u8) {
    outb(0x70, r | 0x80);
    outb(0x71, v);
}

static LOW: AtomicU64 = AtomicU64::new(0);
static EQ: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn wait_irq(irq: u64) {
    let bits = sys::notify_wait(slots::IRQ_NOTIFY, 0).expect("notify wait");
    check!(bits & (1 << 8) != 0, "woken with bits {:#x}", bits);
    // Reading register C acknowledges the RTC; then unmask the line.
    let _ = cmos_read(0x0c);
    sys::irq_ack(irq).expect("irq ack");
}

fn main() {
    let irq = env::cap("irq:8").expect("irq 8 capability");
    // Periodic interrupt at 1024 Hz: rate 6 in register A, PIE in register B.
    let a = cmos_read(0x0a);
    cmos_write(0x0a, (a & 0xf0) | 6);
    let b = cmos_read(0x0b);
    cmos_write(0x0b, b | 0x40);
    let _ = cmos_read(0x0c);
    let mode = env::arg(0).unwrap_or("irq");
    if mode == "sched" {
        thread::spawn(10, 8192, || loop {
            LOW.fetch_add(1, Ordering::Relaxed);
        })
        .expect("low spinner");
        for _ in 0..16 {
            wait_irq(irq);
        }
        check!(
            LOW.load(Ordering::Relaxed) > 0,
            "the low-priority spinner never ran"
        );
        println!(
            "rtc: PASS high-priority thread got 16 interrupts while a low-priority thread spun"
        );
        for eq in &EQ {
            thread::spawn(20, 8192, move || loop {
                eq.fetch_add(1, Ordering::Relaxed);
            })
            .expect("spinner");
        }
        let mut last = [0u64; 2];
        let mut rounds = 0;
        for _ in 0..400 {
            wait_irq(irq);
            let now = [EQ[0].load(Ordering::Relaxed), EQ[1].load(Ordering::Relaxed)];
            if now[0] > last[0] && now[1] > last[1] {
                rounds += 1;
                last = now;
                if rounds == 5 {
                    break;
                }
            }
        }
        check!(
            rounds == 5,
            "equal-priority spinners did not both progress: {:?}",
            last
        );
        println!(
            "rtc: PASS two equal-priority spinners both progressed ({} and {})",
            last[0], last[1]
        );
    } else {
        for i in 0..32 {
            wait_irq(irq);
            if i == 0 {
                println!("rtc: first interrupt received through the notification");
            }
        }
        println!("rtc: PASS 32 RTC interrupts reached the user-level driver");
    }
    cmos_write(0x0b, cmos_read(0x0b) & !0x40);
}
