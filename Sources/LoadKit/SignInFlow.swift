import WireClient

/// Signs simulated people in the way a browser does, against a server whose sign-in is played by the
/// GitHub simulator: `GET /auth/login` (its binding cookie and the authorize URL), the simulator's form
/// approved as a named person, and the callback, which sets the login cookie. Blocking, on the calling
/// thread, before the load starts.
package enum SignInFlow {
    /// Why a sign-in did not give a login cookie.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// Signs `login` in; returns the login cookie's `Cookie` header pair.
    package static func signIn(target: Target, simulator: Target, login: String) throws -> (String, String) {
        func location(_ r: WireResponse, _ step: String) throws -> String {
            guard r.status == 302, let l = r.header("Location") else {
                throw Failure(description: "\(step) answered \(r.status): \(r.text.prefix(200))")
            }
            return l
        }
        func cookies(_ r: WireResponse) -> [String] {
            r.headers.filter { $0.0.lowercased() == "set-cookie" }.map { String($0.1.split(separator: ";")[0]) }
        }
        let server = try target.connect()
        defer { server.close() }
        let start = try server.request("GET", target.basePath + "/auth/login")
        let authorize = try location(start, "GET /auth/login")
        guard let query = authorize.split(separator: "?", maxSplits: 1).last, authorize.contains("?") else {
            throw Failure(description: "the authorize URL has no query: \(authorize.prefix(200))")
        }
        let sim = try simulator.connect()
        defer { sim.close() }
        let approved = try sim.request(
            "POST", simulator.basePath + "/login/oauth/authorize",
            headers: [("Content-Type", "application/x-www-form-urlencoded")],
            body: Array("\(query)&login=\(login)&decision=approve".utf8))
        let back = try location(approved, "the simulator's authorize form")
        guard let path = back.firstRange(of: "/auth/callback").map({ String(back[$0.lowerBound...]) }) else {
            throw Failure(description: "the simulator sent the browser elsewhere: \(back.prefix(200))")
        }
        let binding = cookies(start).joined(separator: "; ")
        let done = try server.request("GET", target.basePath + path, headers: [("Cookie", binding)])
        _ = try location(done, "GET /auth/callback")
        guard
            let login = cookies(done).first(where: { $0.hasPrefix("bff-login=") || $0.hasPrefix("__Host-bff-login=") })
        else { throw Failure(description: "the callback set no login cookie") }
        return ("Cookie", login)
    }

    /// Signs a person out (`POST /auth/logout` with their cookie): their sessions end with them.
    package static func signOut(target: Target, cookie: (String, String)) throws {
        let server = try target.connect()
        defer { server.close() }
        let r = try server.request("POST", target.basePath + "/auth/logout", headers: [cookie])
        guard r.status == 204 else { throw Failure(description: "POST /auth/logout answered \(r.status)") }
    }
}
