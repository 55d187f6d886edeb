import Foundation
import GitHubSearch
import XCTest

@testable import GitHubLive

/// Decoding of real recorded GitHub responses and of the schema's nullable fields.
final class DecodingTests: XCTestCase {
    struct Fixture {
        let headers: [String: String]
        let body: Data
    }

    func fixture(_ name: String) throws -> Fixture {
        let url = try XCTUnwrap(Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures"))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let headers = try XCTUnwrap(object["headers"] as? [String: String])
        let body = try JSONSerialization.data(withJSONObject: try XCTUnwrap(object["body"]))
        return Fixture(headers: headers, body: body)
    }

    func testPageOneDecodes() throws {
        let f = try fixture("search-repositories-page1")
        let request = SearchRequest(query: "github language:Python", sort: .stars, page: 1, perPage: 30)
        let page = try GitHubWire.decodePage(f.body, request: request, link: f.headers["link"].map(LinkHeader.init))
        XCTAssertEqual(page.totalCount, 2723)
        XCTAssertFalse(page.incompleteResults, "absent incomplete_results reads as false")
        XCTAssertEqual(page.repositories.count, 30)
        XCTAssertEqual(page.page, 1)
        XCTAssertTrue(page.hasMore)
        let first = page.repositories[0]
        XCTAssertEqual(first.id, 1_951_148)
        XCTAssertEqual(first.fullName, "kennethreitz/legit")
        XCTAssertEqual(first.owner, "kennethreitz")
        XCTAssertEqual(first.avatarURL, "https://avatars.githubusercontent.com/u/119893")
        XCTAssertEqual(first.htmlURL, "https://github.com/kennethreitz/legit")
        XCTAssertEqual(first.description, "Git for Humans, Inspired by GitHub for Mac™.")
        XCTAssertEqual(first.language, "Python")
        XCTAssertEqual(first.updatedAt, "2014-01-27T17:39:32Z")
        XCTAssertEqual(first.topics, [], "absent topics read as empty")
        XCTAssertGreaterThan(first.stars, 0)
        XCTAssertEqual(Set(page.repositories.map(\.id)).count, 30)
    }

    func testPageTwoDecodesWithAllLinks() throws {
        let f = try fixture("search-repositories-page2")
        let link = LinkHeader(try XCTUnwrap(f.headers["link"]))
        XCTAssertEqual(link.page(of: "next"), 3)
        XCTAssertEqual(link.page(of: "last"), 34)
        XCTAssertEqual(link.page(of: "prev"), 1)
        XCTAssertEqual(link.page(of: "first"), 1)
        let request = SearchRequest(query: "github language:Python", sort: .stars, page: 2, perPage: 30)
        let page = try GitHubWire.decodePage(f.body, request: request, link: link)
        XCTAssertEqual(page.totalCount, 2723)
        XCTAssertEqual(page.repositories.count, 30)
        XCTAssertEqual(page.page, 2)
        XCTAssertTrue(page.hasMore)
        let one = try fixture("search-repositories-page1")
        let firstPage = try GitHubWire.decodePage(one.body, request: request, link: nil)
        XCTAssertTrue(Set(firstPage.repositories.map(\.id)).isDisjoint(with: page.repositories.map(\.id)))
    }

    func testNullAndAbsentOptionalFields() throws {
        let f = try fixture("search-repositories-page1")
        var body = try XCTUnwrap(JSONSerialization.jsonObject(with: f.body) as? [String: Any])
        var items = try XCTUnwrap(body["items"] as? [[String: Any]])
        items[0]["description"] = NSNull()
        items[0]["language"] = NSNull()
        items[1].removeValue(forKey: "description")
        items[1].removeValue(forKey: "language")
        items[2]["topics"] = ["cli", "git"]
        items[3]["topics"] = NSNull()
        body["items"] = items
        body["incomplete_results"] = true
        let data = try JSONSerialization.data(withJSONObject: body)
        let page = try GitHubWire.decodePage(data, request: SearchRequest(query: "x"), link: nil)
        XCTAssertNil(page.repositories[0].description)
        XCTAssertNil(page.repositories[0].language)
        XCTAssertNil(page.repositories[1].description)
        XCTAssertNil(page.repositories[1].language)
        XCTAssertEqual(page.repositories[2].topics, ["cli", "git"])
        XCTAssertEqual(page.repositories[3].topics, [])
        XCTAssertTrue(page.incompleteResults)
        XCTAssertFalse(page.hasMore, "no Link header means no next page")
    }

    func testHasMoreStopsAtTheResultCap() throws {
        let f = try fixture("search-repositories-page1")
        let link = LinkHeader("<https://x/search/repositories?q=a&page=34>; rel=\"next\"")
        let beforeCap = SearchRequest(query: "a", page: 33, perPage: 30)  // next page starts at 990
        XCTAssertTrue(try GitHubWire.decodePage(f.body, request: beforeCap, link: link).hasMore)
        let atCap = SearchRequest(query: "a", page: 34, perPage: 30)  // next page would start at 1020
        XCTAssertFalse(try GitHubWire.decodePage(f.body, request: atCap, link: link).hasMore)
        let hundred = SearchRequest(query: "a", page: 10, perPage: 100)
        XCTAssertFalse(try GitHubWire.decodePage(f.body, request: hundred, link: link).hasMore)
    }

    func testMalformedBodyThrows() {
        XCTAssertThrowsError(
            try GitHubWire.decodePage(
                Data("{\"total_count\": 3, \"items\": [{\"id\":".utf8), request: SearchRequest(query: "a"), link: nil))
        XCTAssertThrowsError(
            try GitHubWire.decodePage(Data("{\"items\": []}".utf8), request: SearchRequest(query: "a"), link: nil))
    }

    func testLinkHeaderParsing() {
        let link = LinkHeader(
            "<https://api.github.com/search/repositories?q=a%2Cb&page=2>; rel=\"next\", <https://api.github.com/search/repositories?q=a,b&page=50>; rel=\"last\""
        )
        XCTAssertEqual(link.next, "https://api.github.com/search/repositories?q=a%2Cb&page=2")
        XCTAssertEqual(
            link.last, "https://api.github.com/search/repositories?q=a,b&page=50", "commas inside <> do not split")
        XCTAssertEqual(link.page(of: "last"), 50)
        XCTAssertNil(link.links["prev"])
        XCTAssertEqual(LinkHeader("garbage, <x>; foo=bar").links, [:])
        XCTAssertEqual(LinkHeader("<u1>;rel=next").next, "u1", "unquoted rel and no spaces")
    }

    func testErrorBodyMessages() throws {
        let decode = { (s: String) in
            try JSONDecoder().decode(GitHubWire.ErrorBody.self, from: Data(s.utf8)).humanMessage
        }
        XCTAssertEqual(
            try decode(
                #"{"message":"Validation Failed","errors":[{"resource":"Search","field":"q","code":"missing"}]}"#),
            "Validation Failed: q missing")
        XCTAssertEqual(
            try decode(
                #"{"message":"Validation Failed","errors":[{"message":"The search is longer than 256 characters.","code":"invalid"}]}"#
            ),
            "The search is longer than 256 characters.")
        XCTAssertEqual(
            try decode(#"{"message":"Only the first 1000 search results are available"}"#),
            "Only the first 1000 search results are available")
    }
}
