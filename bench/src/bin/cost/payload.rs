//! Realistic order events of a given size, from a seeded generator.

use super::*;

// ----------------------------------------------------------------- payload

/// splitmix64: deterministic, seeded per event.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    pub(crate) fn digits(&mut self, n: usize) -> String {
        (0..n).map(|_| char::from(b'0' + self.below(10) as u8)).collect()
    }
    pub(crate) fn alnum(&mut self, n: usize) -> String {
        const A: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        (0..n).map(|_| char::from(A[self.below(A.len() as u64) as usize])).collect()
    }
}

pub(crate) const FIRST: &[&str] = &[
    "Amelia", "Jonas", "Priya", "Mateo", "Sofia", "Liam", "Hana", "Noah", "Chiara", "Oskar", "Yuki", "Elena", "Tomás",
    "Aisha", "Finn", "Marta", "Kwame", "Ingrid", "Rafael", "Zoe",
];
pub(crate) const LAST: &[&str] = &[
    "Schneider",
    "Okafor",
    "Lindqvist",
    "Fernández",
    "Nakamura",
    "Dubois",
    "Kowalski",
    "O'Brien",
    "Rossi",
    "Haddad",
    "Johansson",
    "Müller",
    "Singh",
    "Petrova",
    "Moreau",
    "Costa",
    "Ivanova",
    "Novak",
    "Walsh",
    "Yilmaz",
];
pub(crate) const STREETS: &[&str] = &[
    "Lindenstraße",
    "Rue de la République",
    "Kingsway",
    "Via Garibaldi",
    "Calle Mayor",
    "Elm Street",
    "Hauptstraße",
    "Baker Road",
    "Sveavägen",
    "Rua Augusta",
    "Maple Avenue",
    "Prinsengracht",
];
pub(crate) const CITIES: &[(&str, &str)] = &[
    ("Berlin", "DE"),
    ("Lyon", "FR"),
    ("Manchester", "GB"),
    ("Bologna", "IT"),
    ("Valencia", "ES"),
    ("Portland", "US"),
    ("Hamburg", "DE"),
    ("Leeds", "GB"),
    ("Stockholm", "SE"),
    ("Lisbon", "PT"),
    ("Toronto", "CA"),
    ("Utrecht", "NL"),
];
pub(crate) const ADJ: &[&str] = &[
    "Organic",
    "Stainless",
    "Ergonomic",
    "Recycled",
    "Wireless",
    "Handmade",
    "Compact",
    "Insulated",
    "Waterproof",
    "Bamboo",
    "Ceramic",
    "Merino",
];
pub(crate) const NOUN: &[&str] = &[
    "Coffee Grinder",
    "Desk Lamp",
    "Water Bottle",
    "Backpack",
    "Notebook Set",
    "Headphones",
    "Yoga Mat",
    "Tea Kettle",
    "Wool Socks",
    "Cutting Board",
    "Phone Stand",
    "Rain Jacket",
];
pub(crate) const WORDS: &[&str] = &[
    "please",
    "leave",
    "parcel",
    "with",
    "the",
    "neighbour",
    "at",
    "number",
    "ring",
    "twice",
    "gift",
    "wrap",
    "no",
    "invoice",
    "inside",
    "deliver",
    "after",
    "noon",
    "side",
    "door",
    "fragile",
    "handle",
    "care",
    "call",
    "before",
    "arrival",
    "back",
    "office",
    "reception",
    "closed",
    "weekends",
];

pub(crate) fn money(cents: u64) -> String {
    format!("{}.{:02}", cents / 100, cents % 100)
}

/// A realistic order event of exactly `size` bytes (when `size` allows),
/// different for every `seq`, the same on every run.
pub(crate) fn order_event(tag: &str, seq: usize, size: usize) -> Vec<u8> {
    let mut r = Rng(0x5eed_0000 ^ (seq as u64).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ tag.len() as u64);
    let (first, last) = (r.pick(FIRST), r.pick(LAST));
    let address = |r: &mut Rng| {
        let (city, country) = CITIES[r.below(CITIES.len() as u64) as usize];
        json!({"line1": format!("{} {}", r.below(240) + 1, r.pick(STREETS)), "line2": format!("Apt {}", r.below(90) + 1),
               "city": city, "postal_code": r.digits(5), "country": country})
    };
    let ship = address(&mut r);
    let items: Vec<Value> = (0..(1 + r.below(3)))
        .map(|_| {
            json!({"sku": format!("SKU-{}", r.alnum(8)), "name": format!("{} {}", r.pick(ADJ), r.pick(NOUN)),
                   "quantity": 1 + r.below(4), "unit_price": money(499 + r.below(15_000))})
        })
        .collect();
    let subtotal: u64 = items
        .iter()
        .map(|i| {
            let p: f64 = i["unit_price"].as_str().unwrap().parse().unwrap();
            (p * 100.0).round() as u64 * i["quantity"].as_u64().unwrap()
        })
        .sum();
    let tax = subtotal * 19 / 100;
    let shipping = [0, 495, 995][r.below(3) as usize];
    let mut ev = json!({
        "id": format!("evt_{tag}_{seq:07}_{}", r.alnum(6)),
        "type": "order.created",
        "tenant_id": format!("tenant-{}", r.below(40)),
        "occurred_at": format!("2026-11-{:02}T{:02}:{:02}:{:02}.{:03}Z", 1 + r.below(24), r.below(24), r.below(60), r.below(60), r.below(1000)),
        "producer": "orders-service",
        "trace_id": format!("{:016x}{:016x}", r.next(), r.next()),
        "data": {
            "order_id": format!("ORD-{}-{}", r.digits(4), r.alnum(6)),
            "customer": {
                "id": format!("cus_{}", r.alnum(12)),
                "name": format!("{first} {last}"),
                "email": format!("{}.{}{}@example-mail.test", first.to_lowercase(), last.to_lowercase().replace(['\'', ' '], ""), r.below(100)),
                "phone": format!("+{} {} {}", 30 + r.below(20), r.digits(3), r.digits(6)),
                "loyalty_tier": r.pick(&["none", "silver", "gold", "platinum"]),
            },
            "shipping_address": ship,
            "items": items,
            "currency": r.pick(&["EUR", "GBP", "USD", "SEK"]),
            "subtotal": money(subtotal),
            "tax": money(tax),
            "shipping": money(shipping),
            "total": money(subtotal + tax + shipping),
            "payment": {"method": "card", "brand": r.pick(&["visa", "mastercard", "amex"]), "last4": r.digits(4),
                        "authorization_id": format!("auth_{}", r.alnum(10))},
            "channel": r.pick(&["web", "ios", "android", "pos"]),
            "notes": "",
        }
    });
    let base = serde_json::to_vec(&ev).unwrap().len();
    let mut notes = String::new();
    while base + notes.len() < size {
        if !notes.is_empty() {
            notes.push(' ');
        }
        notes.push_str(r.pick(WORDS));
    }
    notes.truncate(size.saturating_sub(base));
    while notes.ends_with(' ') {
        // A trailing space is fine JSON; keep it varied but not cut mid-escape.
        notes.pop();
        notes.push('.');
    }
    ev["data"]["notes"] = json!(notes);
    serde_json::to_vec(&ev).unwrap()
}
